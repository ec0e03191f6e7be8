#!/usr/bin/env python3
"""A data-sheet model of fused attention against cuDNN on one H100.

Reads the cuDNN attention timings measured on the lent H100
(bench/results/calibration_h100_2026-11-26/torch_attention_and_norms.jsonl)
and prices each with (a) dstc's current data-sheet rule, a GEMM at
e_mm(head dim) = 0.8 d / (d + 128) of peak, and (b) a kernel whose
tensor-core work runs at e_mm's ceiling (0.8) and whose softmax
exponentials, one per score, run one after the other on the special
function units at 3.9e12/s (FlashAttention-3's figure for an H100 SXM:
"989 TFLOPS of FP16 matmul but only 3.9 TFLOPS of special functions").
Prints model / measured time for each (> 1: predicted slow).
Run from the repository root.
"""
import json

PEAK, EXP_RATE, E_MAX, HALF = 989.5e12, 3.9e12, 0.8, 128
path = "bench/results/calibration_h100_2026-11-26/torch_attention_and_norms.jsonl"
print("kind            b  h      s    d causal  measured TF/s  current/meas  exp-bound/meas")
for line in open(path):
    r = json.loads(line)
    if r.get("backend") != "cudnn" or not r.get("what", "").startswith("attention"):
        continue
    d, flops, seconds = r["dim"], r["flops"], r["seconds"]
    per_score = 4 * d if r["what"] == "attention" else 10 * d
    current = flops / (PEAK * E_MAX * d / (d + HALF))
    exp_bound = flops / (PEAK * E_MAX) + flops / per_score / EXP_RATE
    print(f"{r['what']:<15}{r['batch']:>2} {r['heads']:>2} {r['seq']:>6} {d:>4} {str(r['causal']):<6}"
          f"{flops / seconds / 1e12:>14.0f}{current / seconds:>14.2f}{exp_bound / seconds:>16.2f}")
