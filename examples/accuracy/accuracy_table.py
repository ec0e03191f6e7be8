#!/usr/bin/env python3
"""Re-runs every comparison of docs/accuracy.md: simulates each strategy with
`dstc compile FILE --strategy S --simulate --format json`, converts the step
time to TFLOP/s per GPU with Megatron-LM's eq. (3) and prints it beside the
published measurement, the error, and where the critical rank's time went.

Usage (from the repository root): python3 examples/accuracy/accuracy_table.py [STRATEGY ...]
The dstc binary is $DSTC, default build/bin/dstc.
"""
import json
import os
import subprocess
import sys

DSTC = os.environ.get("DSTC", "build/bin/dstc")
SEQ, VOCAB = 2048, 51200

# file, strategy, GPUs, global batch, layers, hidden, measured TFLOP/s per GPU
# (Narayanan et al., SC'21: Table 1 for the weak-scaling rows, Table 2 for 175B).
ROWS = [
    ("megatron_weak_scaling.dstrat", "GPT1_7B", 32, 512, 24, 2304, 137),
    ("megatron_weak_scaling.dstrat", "GPT3_6B", 64, 512, 30, 3072, 138),
    ("megatron_weak_scaling.dstrat", "GPT7_5B", 128, 512, 36, 4096, 142),
    ("megatron_weak_scaling.dstrat", "GPT18_4B", 256, 1024, 40, 6144, 135),
    ("megatron_weak_scaling.dstrat", "GPT39_1B", 512, 1536, 48, 8192, 138),
    ("megatron_gpt3_175b_ptdp.dstrat", "PTDP384", 384, 1536, 96, 12288, 153),
    ("megatron_gpt3_175b_ptdp.dstrat", "PTDP768", 768, 1536, 96, 12288, 149),
    ("megatron_gpt3_175b_ptdp.dstrat", "PTDP1536", 1536, 1536, 96, 12288, 141),
    ("megatron_gpt3_175b_zero3.dstrat", "ZeRO3x384", 384, 1536, 96, 12288, 144),
    ("megatron_gpt3_175b_zero3.dstrat", "ZeRO3x768", 768, 1536, 96, 12288, 88),
    ("megatron_gpt3_175b_zero3.dstrat", "ZeRO3x1536", 1536, 1536, 96, 12288, 44),
]


def eq3_flops(batch, layers, hidden):
    """Megatron-LM eq. (3): FLOPs per iteration, recomputation included."""
    return 96 * batch * SEQ * layers * hidden**2 * (1 + SEQ / (6 * hidden) + VOCAB / (16 * layers * hidden))


def main():
    only = set(sys.argv[1:])
    errors = []
    for file, strategy, gpus, batch, layers, hidden, measured in ROWS:
        if only and strategy not in only:
            continue
        run = subprocess.run([DSTC, "compile", "examples/accuracy/" + file, "--strategy", strategy, "--simulate",
                              "--format", "json"], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{strategy}: dstc failed\n{run.stderr}")
            continue
        report = json.loads(run.stdout)
        flops = eq3_flops(batch, layers, hidden)
        step = report["step_time_s"]
        predicted = flops / (step * gpus) / 1e12
        error = (predicted - measured) / measured * 100
        errors.append(abs(error))
        b = report["breakdown"]
        peak = max(report["peak_memory_bytes"]) / 2**30
        print(f"{strategy:11s} measured {measured:3d} ({flops / (measured * 1e12 * gpus):6.2f} s)  predicted "
              f"{predicted:6.1f} ({step:6.2f} s)  error {error:+6.1f} %  compute {b['compute_s']:.2f} exposed "
              f"{b['exposed_comm_s']:.2f} bubble {b['bubble_s']:.2f} idle {b['idle_s']:.2f}  peak {peak:.1f} GiB"
              f"{' OOM' if report['oom'] else ''}")
    if errors:
        print(f"average |error| {sum(errors) / len(errors):.1f} % over {len(errors)} rows, max {max(errors):.1f} %")


if __name__ == "__main__":
    main()
