#!/usr/bin/env python3
"""Times on the local GPU what each FP8 scaling recipe costs a linear layer:
torch._scaled_mm (cuBLASLt) with one scale per tensor (tensorwise), one per
row of each operand along the contraction dim (rowwise, torchao's
`rowwise` recipe), and 1x128 / 128x128 blocks (blockwise, DeepSeek-V3's
tiles) where this PyTorch has them, beside the bf16 GEMM; and the
quantization itself as eager PyTorch runs it (amax, scale, cast), per
tensor and per row. Llama 3 layer shapes, y[M,N] = x[M,K] w[N,K]^T.
One JSON object per line: {"what", "recipe", "m", "n", "k", "seconds",
"tflops"} or the error; median of 20 after 5 warm-ups, CUDA events."""
import json

import torch

from torch_cross_check import median_seconds

E4M3 = torch.float8_e4m3fn


def emit(what, recipe, m, n, k, fn, flops=None, nbytes=None):
    row = {"what": what, "recipe": recipe, "m": m, "n": n, "k": k}
    try:
        s = median_seconds(fn, runs=20, warmups=5)
        row["seconds"] = s
        if flops:
            row["tflops"] = flops / s / 1e12
        if nbytes:
            row["bytes"] = nbytes
            row["tb_per_s"] = nbytes / s / 1e12
    except Exception as e:  # a recipe this GPU or build lacks: say so, go on
        row["error"] = str(e)[:300]
    print(json.dumps(row), flush=True)


def gemms(m, n, k):
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    flops = 2 * m * n * k
    emit("gemm", "bf16", m, n, k, lambda: x @ w.t(), flops)
    xq, wq = x.to(E4M3), w.to(E4M3)
    one = torch.ones((), device="cuda")
    emit("gemm", "tensorwise", m, n, k,
         lambda: torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), flops)
    sx = torch.ones(m, 1, device="cuda")
    sw = torch.ones(1, n, device="cuda")
    emit("gemm", "rowwise", m, n, k,
         lambda: torch._scaled_mm(xq, wq.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16), flops)
    # DeepSeek-V3's tiles: activations 1x128 (scales [M, K/128], K-major as
    # cuBLASLt wants them), weights 128x128.
    bx = torch.ones(k // 128, m, device="cuda").t()
    bw = torch.ones(n // 128, k // 128, device="cuda")
    try:
        from torch.nn.functional import ScalingType, SwizzleType, scaled_mm  # PyTorch >= 2.9
        emit("gemm", "blockwise", m, n, k,
             lambda: scaled_mm(xq, wq.t(), bx, ScalingType.BlockWise1x128, bw.t(), ScalingType.BlockWise128x128,
                               swizzle_a=SwizzleType.NO_SWIZZLE, swizzle_b=SwizzleType.NO_SWIZZLE,
                               output_dtype=torch.bfloat16), flops)
    except ImportError as e:
        print(json.dumps({"what": "gemm", "recipe": "blockwise", "m": m, "n": n, "k": k, "error": str(e)}))


def quantizations(m, k):
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    # Read twice (amax, then scaled cast), one byte written an element.
    emit("quantize", "tensorwise", m, 0, k,
         lambda: (x * (448.0 / x.abs().amax().float())).to(E4M3), nbytes=m * k * 5)
    emit("quantize", "rowwise", m, 0, k,
         lambda: (x * (448.0 / x.abs().amax(dim=1, keepdim=True).float())).to(E4M3), nbytes=m * k * 5)


def main():
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    for m in (4096, 8192, 16384):
        # Llama 3 8B (qkv, o, gate+up, down) and 70B under TP 8 (qkv, o,
        # gate+up, down).
        for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336),
                     (1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584)):
            gemms(m, n, k)
    for m in (8192, 16384):
        for k in (4096, 8192, 14336):
            quantizations(m, k)


if __name__ == "__main__":
    main()
