#!/usr/bin/env python3
"""A training step of stdlib/models/gpt2.dstrat's GPT-2 in plain PyTorch on
one GPU, to compare with dstc's prediction of the same run
(bench/results/single_gpu_gpt2_2026-11-26/) and, later, with `dstc run` on
the GPU (issue #20 asks for its time against PyTorch eager): pre-norm
blocks of LayerNorm, a fused qkv Linear, causal attention through
scaled_dot_product_attention (cuDNN where it runs), an output projection,
a 4h GELU (tanh) MLP, biases everywhere, no position embeddings (dstc's
GPT2 has none), an untied 50304-way head, the loss on fp32 logits; bf16
weights, pure bf16 fused AdamW, no recomputation, no torch.compile. Prints
one JSON line as torch_llama_step.py does."""
import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_step_profile import write_kernel_table


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x, backend):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        with sdpa_kernel(backend):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Model(nn.Module):
    def __init__(self, vocab, hidden, heads, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens, labels, backend):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, backend)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--profile", help="write the kernels of 3 more steps to this file")
    p.add_argument("--dtype", choices=["bf16", "f32", "tf32"], default="bf16",
                   help="weights and activations in bf16; or in f32, with GEMMs in f32 or TF32 (as dstc run's "
                        "CUDA device's --gemm-precision f32 / tf32)")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = args.dtype == "tf32"
    vocab = 50304
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Model(vocab, args.hidden, args.heads, args.layers)
        if args.dtype == "bf16":
            model = model.to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    tokens = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")
    labels = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")
    backend = SDPBackend.CUDNN_ATTENTION
    try:
        model(tokens, labels, backend).backward()
    except RuntimeError:
        backend = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    opt.zero_grad(set_to_none=True)

    events = lambda: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    steps, fwd_bwd, optim = [], [], []
    torch.cuda.reset_peak_memory_stats()
    for i in range(13):
        (a, b), (c, d) = events(), events()
        a.record()
        loss = model(tokens, labels, backend)
        loss.backward()
        b.record()
        c.record()
        opt.step()
        opt.zero_grad(set_to_none=True)
        d.record()
        d.synchronize()
        if i >= 3:
            fwd_bwd.append(a.elapsed_time(b) * 1e-3)
            optim.append(c.elapsed_time(d) * 1e-3)
            steps.append(a.elapsed_time(d) * 1e-3)
    if args.profile:
        def step():
            model(tokens, labels, backend).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        write_kernel_table(args.profile, step)
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "attention": str(backend), "hidden": args.hidden, "heads": args.heads, "layers": args.layers,
                      "seq": args.seq, "batch": args.batch, "dtype": args.dtype,
                      "step_s": med(steps), "forward_backward_s": med(fwd_bwd), "optimizer_s": med(optim),
                      "peak_memory_bytes": torch.cuda.max_memory_allocated(),
                      "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
