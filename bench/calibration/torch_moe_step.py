#!/usr/bin/env python3
"""A training step of a Mixtral 8x7B-shaped model cut to a few layers, in
plain PyTorch on one GPU, to compare with dstc's prediction of the same run
(bench/results/single_gpu_moe_2026-11-26/). The attention half is
torch_llama_step.py's (grouped-query heads repeated, cuDNN causal attention,
rotate-half RoPE); the MLP is a mixture of 8 SwiGLU experts, each token
routed to 2 (softmax over the experts, the top 2 renormalised), with the
routing dstc's `dispatch` and `combine` define:

- `capacity`: each expert has C = seq * k / experts slots per sequence
  (capacity factor 1), filled in token order, the tokens past C dropped; the
  slots, laid out [expert, batch, slot], run through batched GEMMs (the
  experts' einsums of stdlib/layers/moe.dstrat), empty slots included.
- `dropless`: every routed token is kept; tokens are sorted by expert and
  each expert's GEMMs run on its own tokens, either one GEMM per expert
  (`--experts loop`, Megatron-Core's SequentialMLP) or one grouped GEMM
  (`--experts grouped`, torch._grouped_mm, as torchtitan and Megatron-Core's
  GroupedMLP), each expert's rows padded to a multiple of 16.

bf16 weights, pure bf16 fused AdamW without a master copy, no
recomputation, no torch.compile. Prints one JSON line: median step,
forward+backward and optimizer times of 10 steps after 3 warm-ups (CUDA
events), peak memory, and the routing's tokens per expert (busiest / mean)."""
import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_step_profile import write_kernel_table

from torch_llama_step import rope


class Experts(nn.Module):
    def __init__(self, hidden, ffn, experts, k, mode, grouped):
        super().__init__()
        self.experts, self.k, self.mode, self.grouped = experts, k, mode, grouped
        self.router = nn.Linear(hidden, experts, bias=False)
        init = lambda *shape: nn.Parameter(torch.randn(*shape) * 0.02)
        self.w_gate = init(experts, hidden, ffn)
        self.w_up = init(experts, hidden, ffn)
        self.w_down = init(experts, ffn, hidden)
        self.loads = []

    def forward(self, x):
        b, s, h = x.shape
        probs = F.softmax(self.router(x), dim=-1)
        top, chosen = probs.topk(self.k, dim=-1)
        gates = top / top.sum(-1, keepdim=True)
        tokens = x.reshape(b * s, h)
        # One row per (token, choice), token-major: the order slots fill in.
        token_of = torch.arange(b * s, device=x.device).repeat_interleave(self.k)
        expert_of = chosen.reshape(-1)
        gate_of = gates.reshape(-1)
        counts = torch.bincount(expert_of, minlength=self.experts)
        self.loads.append(counts)
        if self.mode == "capacity":
            return self.capacity_forward(tokens, token_of, expert_of, gate_of, b, s).view(b, s, h)
        return self.dropless_forward(tokens, token_of, expert_of, gate_of, counts).view(b, s, h)

    def swiglu(self, rows):
        return torch.bmm(F.silu(torch.bmm(rows, self.w_gate)) * torch.bmm(rows, self.w_up), self.w_down)

    def capacity_forward(self, tokens, token_of, expert_of, gate_of, b, s):
        e, h = self.experts, tokens.shape[1]
        capacity = s * self.k // e
        onehot = F.one_hot(expert_of, e).view(b, s * self.k, e)
        position = ((onehot.cumsum(1) - 1) * onehot).sum(-1).view(-1)
        kept = position < capacity
        batch_of = token_of // s
        slot = ((expert_of * b + batch_of) * capacity + position)[kept]
        slots = tokens.new_zeros(e * b * capacity, h).index_copy(0, slot, tokens[token_of[kept]])
        y = self.swiglu(slots.view(e, b * capacity, h)).reshape(-1, h)
        contribution = y[slot] * gate_of[kept, None]
        return tokens.new_zeros(tokens.shape).index_add(0, token_of[kept], contribution)

    def dropless_forward(self, tokens, token_of, expert_of, gate_of, counts):
        order = torch.argsort(expert_of, stable=True)
        h = tokens.shape[1]
        if self.grouped:
            padded = (counts + 15) // 16 * 16
            ends = padded.cumsum(0)
            starts = ends - padded
            first = counts.cumsum(0) - counts
            sorted_expert = expert_of[order]
            destination = starts[sorted_expert] + torch.arange(order.numel(), device=tokens.device) - first[sorted_expert]
            rows = tokens.new_zeros(int(ends[-1]), h).index_copy(0, destination, tokens[token_of[order]])
            offs = ends.to(torch.int32)
            act = F.silu(torch._grouped_mm(rows, self.w_gate, offs=offs)) * torch._grouped_mm(rows, self.w_up, offs=offs)
            y = torch._grouped_mm(act, self.w_down, offs=offs)[destination]
        else:
            rows = tokens[token_of[order]]
            outs, start = [], 0
            for expert, count in enumerate(counts.tolist()):
                part = rows[start:start + count]
                outs.append((F.silu(part @ self.w_gate[expert]) * (part @ self.w_up[expert])) @ self.w_down[expert])
                start += count
            y = torch.cat(outs)
        contribution = y * gate_of[order, None]
        return tokens.new_zeros(tokens.shape).index_add(0, token_of[order], contribution)


class Block(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn, experts, k, mode, grouped):
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, hidden // heads
        self.norm1 = nn.RMSNorm(hidden)
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.norm2 = nn.RMSNorm(hidden)
        self.moe = Experts(hidden, ffn, experts, k, mode, grouped)

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
        return x + self.moe(self.norm2(x))


class Model(nn.Module):
    def __init__(self, vocab, hidden, layers, **block):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, **block) for _ in range(layers))
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
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--routing", choices=["capacity", "dropless"], default="capacity")
    p.add_argument("--experts", choices=["loop", "grouped"], default="loop")
    p.add_argument("--profile", help="write the kernels of 3 more steps to this file")
    args = p.parse_args()
    hidden, heads, kv_heads, ffn, vocab, experts, top_k = 4096, 32, 8, 14336, 32000, 8, 2
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Model(vocab, hidden, args.layers, heads=heads, kv_heads=kv_heads, ffn=ffn, experts=experts, k=top_k,
                      mode=args.routing, grouped=args.experts == "grouped").to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    tokens = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")
    labels = torch.randint(0, vocab, (args.batch, args.seq), device="cuda")
    dim = hidden // heads
    inv = 1.0 / (1000000.0 ** (torch.arange(0, dim, 2, device="cuda").float() / dim))
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
    if args.profile:
        def step():
            model(tokens, labels, cos, sin, backend).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        write_kernel_table(args.profile, step)
    med = lambda xs: sorted(xs)[len(xs) // 2]
    loads = [(c.max() / c.float().mean()).item() for block in model.blocks for c in block.moe.loads]
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "attention": str(backend), "layers": args.layers, "seq": args.seq, "batch": args.batch,
                      "routing": args.routing, "experts": args.experts,
                      "step_s": med(steps), "forward_backward_s": med(fwd_bwd), "optimizer_s": med(optim),
                      "busiest_expert_load": med(loads),
                      "peak_memory_bytes": torch.cuda.max_memory_allocated(),
                      "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
