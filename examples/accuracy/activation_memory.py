#!/usr/bin/env python3
"""Activation memory per transformer layer, dstc against Korthikanti et al.
(MLSys 2023) Table 2: compiles each strategy of activation_memory.dstrat
with 2 and 4 layers, takes the activations' peak of the fullest rank
(`memory_kind_peaks` of `--format json`) and prints half the difference
beside the formula.

Usage (from the repository root): python3 examples/accuracy/activation_memory.py
The dstc binary is $DSTC, default build/bin/dstc.
"""
import json
import os
import subprocess

DSTC = os.environ.get("DSTC", "build/bin/dstc")
FILE = "examples/accuracy/activation_memory.dstrat"
S, B, H, A, T = 2048, 1, 12288, 96, 8


def formula(strategy):
    sbh = S * B * H
    if strategy == "OneDevice":
        return sbh * (34 + 5 * A * S / H)
    if strategy == "TensorParallel":
        return sbh * (10 + 24 / T + 5 * A * S / (H * T))
    if strategy == "SequenceParallelSelective":
        return sbh / T * 34
    if strategy == "TensorParallelSelective":
        return sbh * (10 + 24 / T)
    if strategy == "FullRecompute":
        return sbh * 2
    return sbh / T * (34 + 5 * A * S / H)


def activations(strategy, layers):
    out = subprocess.run([DSTC, "compile", FILE, "--strategy", strategy, "-D", f"layers={layers}", "--simulate",
                          "--format", "json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["memory_kind_peaks"]["activations_bytes"]


def main():
    for strategy in ("OneDevice", "TensorParallel", "SequenceParallel", "SequenceParallelSelective",
                     "TensorParallelSelective", "FullRecompute"):
        per_layer = (activations(strategy, 4) - activations(strategy, 2)) / 2
        expected = formula(strategy)
        print(f"{strategy:25} dstc {per_layer / 1e6:8.1f} MB  formula {expected / 1e6:8.1f} MB  "
              f"error {100 * (per_layer - expected) / expected:+6.2f} %")


if __name__ == "__main__":
    main()
