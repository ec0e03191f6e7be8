#!/usr/bin/env python3
"""Times on the local GPU, through PyTorch, what `dstc calibrate` measures
through cuBLASLt (matmuls per dtype, a streaming add), plus kernels the
calibration does not time yet (FlashAttention forward and backward, layer
and RMS norm, softmax), so that the profile and the cost model can be
checked against what a training framework gets. One JSON object per line:
{"what", "dtype", "shape", "flops", "bytes", "seconds"}; median of 10 after
3 warm-ups, CUDA events."""
import json
import sys

import torch
import torch.nn.functional as F


def median_seconds(fn, runs=10, warmups=3):
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    times.sort()
    return times[len(times) // 2]


def emit(what, dtype, shape, flops, nbytes, fn):
    try:
        seconds = median_seconds(fn)
        print(json.dumps({"what": what, "dtype": dtype, "shape": shape, "flops": flops, "bytes": nbytes,
                          "seconds": seconds}), flush=True)
    except Exception as e:  # a kernel this GPU or build lacks: say so, go on
        print(json.dumps({"what": what, "dtype": dtype, "shape": shape, "error": str(e)}), flush=True)


def matmuls():
    shapes = [(8192, 8192, 8192), (4096, 4096, 4096), (16384, 4096, 4096), (4096, 16384, 4096),
              (4096, 4096, 16384), (2048, 2048, 2048), (1024, 1024, 1024), (4096, 4096, 128)]
    for m, n, k in shapes:
        for name, dtype in [("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)]:
            a = torch.rand(m, k, device="cuda", dtype=dtype) * 2 - 1
            b = torch.rand(k, n, device="cuda", dtype=dtype) * 2 - 1
            size = a.element_size()
            torch.backends.cuda.matmul.allow_tf32 = False
            emit("matmul", name, [m, n, k], 2 * m * n * k, size * (m * k + k * n + m * n), lambda: a @ b)
            if dtype == torch.float32:
                torch.backends.cuda.matmul.allow_tf32 = True
                emit("matmul", "tf32", [m, n, k], 2 * m * n * k, size * (m * k + k * n + m * n), lambda: a @ b)
                torch.backends.cuda.matmul.allow_tf32 = False
        a8 = (torch.rand(m, k, device="cuda") * 2 - 1).to(torch.float8_e4m3fn)
        b8 = (torch.rand(n, k, device="cuda") * 2 - 1).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device="cuda")
        emit("matmul", "fp8", [m, n, k], 2 * m * n * k, m * k + k * n + 2 * m * n,
             lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))


def memory_bound():
    for elements in [1 << 20, 1 << 24, 1 << 28]:
        a = torch.rand(elements, device="cuda")
        b = torch.rand(elements, device="cuda")
        c = torch.empty_like(a)
        emit("add", "fp32", [elements], 0, 12 * elements, lambda: torch.add(a, b, out=c))
    for tokens, hidden in [(8192, 4096), (16384, 8192)]:
        x = torch.rand(tokens, hidden, device="cuda", dtype=torch.bfloat16)
        w = torch.ones(hidden, device="cuda", dtype=torch.bfloat16)
        nbytes = 2 * 2 * tokens * hidden
        emit("layer_norm", "bf16", [tokens, hidden], 0, nbytes, lambda: F.layer_norm(x, (hidden,), w, w))
        emit("rms_norm", "bf16", [tokens, hidden], 0, nbytes, lambda: F.rms_norm(x, (hidden,), w))
        emit("softmax", "bf16", [tokens, hidden], 0, nbytes, lambda: torch.softmax(x, dim=-1))


def attention():
    for batch, heads, seq, dim in [(1, 32, 4096, 128), (1, 32, 8192, 128), (4, 16, 2048, 128)]:
        q, k, v = (torch.rand(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        # Causal: half the score matrix; 2 matmuls of 2 FLOPs per MAC.
        flops = 4 * batch * heads * seq * seq * dim // 2
        nbytes = 4 * 2 * batch * heads * seq * dim
        emit("attention_causal", "bf16", [batch, heads, seq, dim], flops, nbytes,
             lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        grad = torch.ones_like(out)
        emit("attention_causal_grad", "bf16", [batch, heads, seq, dim], int(2.5 * flops), 2 * nbytes,
             lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True))


if __name__ == "__main__":
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cuda": torch.version.cuda}), flush=True)
    for part in (matmuls, memory_bound, attention):
        try:
            part()
        except Exception as e:
            print(json.dumps({"part": part.__name__, "error": str(e)}), flush=True)
    sys.exit(0)
