#!/usr/bin/env python3
"""Reads torch_expert_gemms.py's JSON lines and prints, per shape, the
measured TFLOP/s and the default roofline's predicted / measured time (dstc's
e_mm(d) = 0.80 d / (d + 128) of the bf16 peak), with d the smallest of
m, n, k taken two ways: of one expert's GEMM (how dstc prices a batched
einsum) and with the experts folded into the rows (how it did before
2026-11-26). Usage: expert_gemms_vs_roofline.py FILE.jsonl [PEAK_TFLOPS]."""
import json
import statistics
import sys


def efficiency(d):
    return 0.80 * d / (d + 128)


def main():
    peak = float(sys.argv[2]) * 1e12 if len(sys.argv) > 2 else 989.5e12
    by_tokens = {}
    print("| what | model | experts | tokens | m | n | k | TFLOP/s | per expert / measured | folded / measured |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if "seconds" not in r:
            continue
        experts, m, n, k = r["experts"], r["m"], r["n"], r["k"]
        weight_grad = r["what"] == "batched_weight_grad"
        folded = min(m, n, k * experts) if weight_grad else min(m * experts, n, k)
        member = r["flops"] / (peak * efficiency(min(m, n, k))) / r["seconds"]
        whole = r["flops"] / (peak * efficiency(folded)) / r["seconds"]
        if r["what"] != "loop_forward":  # one launch per expert: not what dstc prices
            by_tokens.setdefault(r["tokens"], []).append((member, whole))
        print(f"| {r['what']} | {r['model']} | {experts} | {r['tokens']} | {m} | {n} | {k} | "
              f"{r['flops'] / r['seconds'] / 1e12:.0f} | {member:.2f} | {whole:.2f} |")
    print()
    print("Batched and grouped GEMMs (the loop's one launch per expert left out):")
    print()
    print("| tokens per expert | shapes | per expert / measured, median (min-max) | folded / measured, median (min-max) |")
    print("| --- | --- | --- | --- |")
    for tokens, pairs in sorted(by_tokens.items()):
        cols = []
        for i in (0, 1):
            xs = [p[i] for p in pairs]
            cols.append(f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})")
        print(f"| {tokens} | {len(pairs)} | {cols[0]} | {cols[1]} |")


if __name__ == "__main__":
    main()
