#!/usr/bin/env python3
"""Turns fused-attention timings from torch_attention_and_norms.py into
`[[op]]` entries of a dstc profile (docs/cost-model.md), in the IR's
conventions: kind "attention" or "attention_grad", shape [b*h*s, head dim,
FLOPs / (2 x b*h*s x head dim)], FLOPs as the IR counts them (a causal
mask halves them). Appended to a profile written by `dstc calibrate`, they
price attention by measurement instead of as a matmul. Only causal timings
are kept: an [m, n, k] query does not say whether the op is causal, and a
causal kernel of length 2t has the shape of a full one of length t.
Usage: attention_profile_entries.py TIMINGS.jsonl [--backend cudnn] >> PROFILE.toml"""
import argparse
import json


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("timings")
    parser.add_argument("--backend", default="cudnn", help="cudnn (Transformer Engine's on Hopper) or flash (FA2)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.timings)]
    device = rows[0].get("device", "?")
    print(f"\n# Causal fused attention ({args.backend} through PyTorch {rows[0].get('torch', '?')} on {device}),"
          f" from bench/calibration/attention_profile_entries.py")
    for r in rows[1:]:
        if r.get("backend") != args.backend or "seconds" not in r or not r["causal"]:
            continue
        b, h, s, d = r["batch"], r["heads"], r["seq"], r["dim"]
        m = b * h * s
        k = r["flops"] // (2 * m * d)
        # q, k, v and the output (forward); those, dO and dq, dk, dv (backward).
        nbytes = 2 * m * d * (4 if r["what"] == "attention" else 8)
        print(f"\n[[op]]\nkind = \"{r['what']}\"\ndtype = \"bf16\"\nshape = [{m}, {d}, {k}]\n"
              f"flops = {r['flops']}\nbytes = {nbytes}\nseconds = {r['seconds']:.6g}")


if __name__ == "__main__":
    main()
