#!/usr/bin/env python3
"""Times PyTorch's fused AdamW (the multi-tensor kernel DDP and FSDP runs
use; Megatron's and DeepSpeed's fused Adams are the same kind) on the local
GPU over parameter counts and precisions, to check the cost model's price
of the optimizer step. One JSON object per line with the bytes the step
reads and writes (parameter, gradient, both moments, read and written back;
the gradient only read) and the median of 10 steps after 3 warm-ups."""
import json

import torch


def bytes_moved(n, param, grad, state):
    size = {torch.float32: 4, torch.bfloat16: 2}
    return n * (2 * size[param] + size[grad] + 4 * size[state])


def main():
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    for total in (1 << 24, 1 << 27, 1 << 29, 1 << 30):
        for name, param, grad in (("bf16", torch.bfloat16, torch.bfloat16), ("fp32", torch.float32, torch.float32)):
            tensors = 64
            params = [torch.zeros(total // tensors, device="cuda", dtype=param, requires_grad=True)
                      for _ in range(tensors)]
            for p in params:
                p.grad = torch.randn(p.shape, device="cuda", dtype=grad)
            opt = torch.optim.AdamW(params, lr=1e-5, fused=True)
            for _ in range(3):
                opt.step()
            times = []
            for _ in range(10):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                opt.step()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1e-3)
            seconds = sorted(times)[5]
            state = param  # fused AdamW keeps its moments in the parameter's dtype
            moved = bytes_moved(total, param, grad, state)
            print(json.dumps({"what": "adamw_fused", "precision": name, "parameters": total, "bytes": moved,
                              "seconds": seconds, "bytes_per_second": moved / seconds}), flush=True)
            del params, opt
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
