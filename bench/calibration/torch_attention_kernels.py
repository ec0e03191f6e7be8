#!/usr/bin/env python3
"""The kernels fused attention runs, forward and backward, through PyTorch's
cuDNN and FlashAttention 2 backends (causal, bf16, 16K tokens per call):
each kernel's name and GPU time per call (torch.profiler), so a backward's
time can be split into its main kernel and the passes around it (dO.O's
row sums, dQ's conversion from its f32 accumulator). One JSON object per
line."""
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

CALLS = 5


def kernels(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.self_device_time_total > 0:
            rows.append({"kernel": e.key[:160], "count": e.count // CALLS,
                         "us_per_call": e.self_device_time_total / CALLS})
    return sorted(rows, key=lambda r: -r["us_per_call"])


def main():
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version()}), flush=True)
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    for dim, seq in ((128, 1024), (128, 4096), (128, 8192), (128, 16384), (64, 8192)):
        heads = 32 if dim == 128 else 64
        batch = max(1, 16384 // seq)
        q, k, v = (torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        flops = 4 * batch * heads * seq * seq * dim // 2
        for name, backend in backends.items():
            base = {"backend": name, "batch": batch, "heads": heads, "seq": seq, "dim": dim, "causal": True,
                    "forward_flops": flops}
            try:
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    grad = torch.randn_like(out)
                    print(json.dumps(dict(base, what="forward", kernels=kernels(
                        lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)))), flush=True)
                    print(json.dumps(dict(base, what="backward", kernels=kernels(
                        lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)))), flush=True)
            except Exception as e:  # a backend this build lacks: say so, go on
                print(json.dumps(dict(base, error=str(e)[:200])), flush=True)
        del q, k, v


if __name__ == "__main__":
    main()
