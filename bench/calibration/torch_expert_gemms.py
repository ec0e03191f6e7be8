#!/usr/bin/env python3
"""Times the GEMMs of a mixture of experts' layer on the local GPU, for the
expert shapes of Mixtral 8x7B (h 4096, f 14336), DeepSeek-V3 (7168, 2048)
and Qwen3-30B-A3B (2048, 768), with E local experts of T tokens each, three
ways: one batched GEMM over the experts (torch.bmm: what dstc's experts
einsum is, and padded capacity routing runs), one grouped GEMM
(torch._grouped_mm: dropless routing in torchtitan and Megatron-Core's
GroupedMLP) and one GEMM per expert in a loop (Megatron-Core's
SequentialMLP). The batched form is timed for the three GEMMs of a linear's
step (forward, input gradient, weight gradient). One JSON object per line:
{"what", "experts", "tokens", "m", "n", "k", "flops", "seconds"}; median of 10
after 3 warm-ups, CUDA events, bf16."""
import json

import torch

from torch_cross_check import median_seconds

SHAPES = [  # (model, hidden, ffn, local experts, tokens per expert)
    *[("mixtral", 4096, 14336, 8, t) for t in (512, 2048, 8192)],
    *[("deepseek_v3", 7168, 2048, e, t) for e in (8, 32) for t in (128, 512, 2048, 8192)],
    *[("qwen3_30b_a3b", 2048, 768, e, t) for e in (16, 128) for t in (128, 512, 2048)],
]


def emit(what, model, experts, tokens, m, n, k, fn):
    record = {"what": what, "model": model, "experts": experts, "tokens": tokens, "m": m, "n": n, "k": k,
              "flops": 2 * experts * m * n * k}
    try:
        record["seconds"] = median_seconds(fn)
    except Exception as e:  # a kernel this GPU or build lacks: say so, go on
        record["error"] = str(e)
    print(json.dumps(record), flush=True)


def main():
    dtype = torch.bfloat16
    for model, hidden, ffn, experts, tokens in SHAPES:
        x = torch.randn(experts, tokens, hidden, device="cuda", dtype=dtype)
        w = torch.randn(experts, hidden, ffn, device="cuda", dtype=dtype)
        dy = torch.randn(experts, tokens, ffn, device="cuda", dtype=dtype)
        emit("batched_forward", model, experts, tokens, tokens, ffn, hidden, lambda: torch.bmm(x, w))
        emit("batched_input_grad", model, experts, tokens, tokens, hidden, ffn,
             lambda: torch.bmm(dy, w.transpose(1, 2)))
        emit("batched_weight_grad", model, experts, tokens, hidden, ffn, tokens,
             lambda: torch.bmm(x.transpose(1, 2), dy))
        rows = x.view(experts * tokens, hidden)
        offs = torch.arange(1, experts + 1, device="cuda", dtype=torch.int32) * tokens
        emit("grouped_forward", model, experts, tokens, tokens, ffn, hidden,
             lambda: torch._grouped_mm(rows, w, offs=offs))
        emit("loop_forward", model, experts, tokens, tokens, ffn, hidden,
             lambda: [x[e] @ w[e] for e in range(experts)])
        del x, w, dy, rows


if __name__ == "__main__":
    main()
