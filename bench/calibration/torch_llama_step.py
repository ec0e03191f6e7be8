#!/usr/bin/env python3
"""A training step of a Llama 3 8B-shaped model cut to a few layers, in plain
PyTorch on one GPU, to compare with dstc's prediction of the same run
(bench/results/single_gpu_llama_2026-11-26/): bf16 weights and pure bf16
AdamW (fused, no fp32 master copy), causal attention through
scaled_dot_product_attention (cuDNN where it runs, else PyTorch's choice),
grouped-query heads repeated to the query heads, rotary embeddings as
rotate-half, RMSNorm and SiLU from torch.nn.functional, no recomputation,
no torch.compile. Prints JSON: median step, forward+backward and optimizer
times of 10 steps after 3 warm-ups (CUDA events), and peak memory."""
import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class Block(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, hidden // heads
        self.norm1 = nn.RMSNorm(hidden)
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.norm2 = nn.RMSNorm(hidden)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin, backend):
        b, s, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, self.dim).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.dim).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        with sdpa_kernel(backend):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Model(nn.Module):
    def __init__(self, vocab, hidden, heads, kv_heads, ffn, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = nn.RMSNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens, labels, cos, sin, backend):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin, backend)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--batch", type=int, default=1)
    args = p.parse_args()
    hidden, heads, kv_heads, ffn, vocab = 4096, 32, 8, 14336, 128256
    torch.manual_seed(0)
    model = Model(vocab, hidden, heads, kv_heads, ffn, args.layers).cuda().to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    tokens = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")
    labels = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")
    dim = hidden // heads
    inv = 1.0 / (500000.0 ** (torch.arange(0, dim, 2, device="cuda").float() / dim))
    angles = torch.outer(torch.arange(args.seq, device="cuda").float(), inv)
    cos = torch.cat((angles.cos(), angles.cos()), -1).to(torch.bfloat16)
    sin = torch.cat((angles.sin(), angles.sin()), -1).to(torch.bfloat16)
    backend = SDPBackend.CUDNN_ATTENTION
    try:
        model(tokens, labels, cos, sin, backend).backward()
    except RuntimeError:
        backend = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    opt.zero_grad(set_to_none=True)

    events = lambda: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    steps, fwd_bwd, optim = [], [], []
    torch.cuda.reset_peak_memory_stats()
    for i in range(13):
        (a, b), (c, d) = events(), events()
        a.record()
        loss = model(tokens, labels, cos, sin, backend)
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
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "attention": str(backend), "layers": args.layers, "seq": args.seq, "batch": args.batch,
                      "step_s": med(steps), "forward_backward_s": med(fwd_bwd), "optimizer_s": med(optim),
                      "peak_memory_bytes": torch.cuda.max_memory_allocated(),
                      "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
