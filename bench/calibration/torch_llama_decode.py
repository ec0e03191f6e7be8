#!/usr/bin/env python3
"""Inference with a KV cache on one GPU in plain PyTorch, to compare with
dstc's prediction of the same steps: the whole Llama 3 8B (32 layers, bf16
weights, random values) over a preallocated bf16 cache of k and v per layer
([batch, kv_heads, capacity, head_dim]).

A decode step feeds one token per sequence at position `context`: every
layer writes its new k and v into the cache in place and attends over the
context + 1 cached positions, grouped-query heads read straight from the cache
(`--attention grouped`: q viewed as [batch, kv_heads, group, dim] against
its k/v head by two matmuls; `sdpa`: scaled_dot_product_attention with
enable_gqa, whichever kernel PyTorch picks); the
head computes the logits of the new tokens. It runs as one CUDA graph, as
vLLM and TensorRT-LLM run decode, so the host's launches do not count; the
same step run eagerly is timed beside it. A prefill step runs the prompt's
`seq` tokens per sequence through the model (causal attention through
scaled_dot_product_attention), writing the cache, and computes the logits
of every position. Prints one JSON line per step: median of 20 after 5
warm-ups (CUDA events); `--profile` adds each step's kernels, run eagerly."""
import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_llama_step as training
from torch_llama_step import rope
from torch_step_profile import write_kernel_table


class Block(training.Block):
    """torch_llama_step.py's layer, with its keys and values kept in a cache."""
    attention = "grouped"

    def forward(self, x, cos, sin, k_cache, v_cache, start):
        b, s, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, self.dim).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.dim).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k_cache[:, :, start:start + s] = k
        v_cache[:, :, start:start + s] = v
        if s == 1 and self.attention == "sdpa":
            # Decode through PyTorch's attention (its flash kernel splits the
            # cached keys over thread blocks when there is one query).
            a = F.scaled_dot_product_attention(q, k_cache[:, :, :start + 1], v_cache[:, :, :start + 1],
                                               enable_gqa=True)
            a = a.transpose(1, 2).reshape(b, 1, -1)
        elif s == 1:
            # Decode: the group's queries against their k/v head, in place.
            keys, values = k_cache[:, :, :start + 1], v_cache[:, :, :start + 1]
            g = q.reshape(b, self.kv_heads, self.heads // self.kv_heads, self.dim)
            scores = torch.matmul(g, keys.transpose(-1, -2)) * self.dim**-0.5
            a = torch.matmul(torch.softmax(scores.float(), -1).to(q.dtype), values)
            a = a.reshape(b, 1, -1)
        else:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            a = a.transpose(1, 2).reshape(b, s, -1)
        x = x + self.o(a)
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, vocab, hidden, heads, kv_heads, ffn, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = nn.RMSNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens, cos, sin, caches, start):
        x = self.embed(tokens)
        for block, (k_cache, v_cache) in zip(self.blocks, caches):
            x = block(x, cos, sin, k_cache, v_cache, start)
        return self.head(self.norm(x))


def timed(fn, warmup=5, steps=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return sorted(times)[len(times) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--decode", nargs="*", default=[], help="batch:context pairs")
    p.add_argument("--prefill", nargs="*", default=[], help="batch:seq pairs")
    p.add_argument("--attention", choices=["grouped", "sdpa"], default="grouped",
                   help="decode attention: q grouped against the cache by matmuls, or scaled_dot_product_attention")
    p.add_argument("--profile", help="write each step's kernels (eager) to PROFILE_<phase>_<batch>_<n>.txt")
    args = p.parse_args()
    hidden, heads, kv_heads, ffn, vocab = 4096, 32, 8, 14336, 128256
    dim = hidden // heads
    torch.manual_seed(0)
    with torch.no_grad():
        model = Model(vocab, hidden, heads, kv_heads, ffn, args.layers).cuda().to(torch.bfloat16)
        inv = 1.0 / (500000.0**(torch.arange(0, dim, 2, device="cuda").float() / dim))
        for block in model.blocks:
            block.attention = args.attention
        meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "layers": args.layers,
                "decode_attention": args.attention,
                "parameters": sum(p.numel() for p in model.parameters())}

        def tables(first, count):
            angles = torch.outer(torch.arange(first, first + count, device="cuda").float(), inv)
            both = lambda t: torch.cat((t, t), -1).to(torch.bfloat16)
            return both(angles.cos()), both(angles.sin())

        def caches(batch, capacity):
            shape = (batch, kv_heads, capacity, dim)
            return [(torch.randn(shape, device="cuda", dtype=torch.bfloat16),
                     torch.randn(shape, device="cuda", dtype=torch.bfloat16)) for _ in range(args.layers)]

        for pair in args.decode:
            batch, context = map(int, pair.split(":"))
            kv = caches(batch, context + 1)
            tokens = torch.randint(0, vocab, (batch, 1), device="cuda")
            cos, sin = tables(context, 1)
            step = lambda: model(tokens, cos, sin, kv, context)
            torch.cuda.reset_peak_memory_stats()
            eager = timed(step)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            graphed = timed(graph.replay)
            if args.profile:
                write_kernel_table(f"{args.profile}_decode_{batch}_{context}.txt", step)
            print(json.dumps({**meta, "phase": "decode", "batch": batch, "context": context,
                              "step_s": graphed, "eager_step_s": eager,
                              "cache_bytes": sum(k.numel() * 2 * 2 for k, _ in kv),
                              "peak_memory_bytes": torch.cuda.max_memory_allocated()}), flush=True)
            del kv, graph
            torch.cuda.empty_cache()

        for pair in args.prefill:
            batch, seq = map(int, pair.split(":"))
            kv = caches(batch, seq)
            tokens = torch.randint(0, vocab, (batch, seq), device="cuda")
            cos, sin = tables(0, seq)
            torch.cuda.reset_peak_memory_stats()
            t = timed(lambda: model(tokens, cos, sin, kv, 0), warmup=3, steps=10)
            if args.profile:
                write_kernel_table(f"{args.profile}_prefill_{batch}_{seq}.txt", lambda: model(tokens, cos, sin, kv, 0))
            print(json.dumps({**meta, "phase": "prefill", "batch": batch, "seq": seq, "step_s": t,
                              "cache_bytes": sum(k.numel() * 2 * 2 for k, _ in kv),
                              "peak_memory_bytes": torch.cuda.max_memory_allocated()}), flush=True)
            del kv
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
