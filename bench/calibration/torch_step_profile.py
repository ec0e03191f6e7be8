"""Shared by the torch_*_step.py scripts: `--profile FILE` writes the GPU
kernels of a few more steps (torch.profiler, self CUDA time, largest first),
to see which kernels a gap between dstc and the measurement lies in."""
import torch
from torch.profiler import ProfilerActivity, profile


def write_kernel_table(path, step, steps=3):
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    events = prof.key_averages()
    with open(path, "w") as out:
        out.write(f"{steps} steps\n")
        out.write(events.table(sort_by="self_cuda_time_total", row_limit=70, max_name_column_width=90))
