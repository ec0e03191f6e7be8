#!/usr/bin/env python3
"""How far the cost model's default roofline (docs/cost-model.md: e_mm =
0.80 d / (d + 128) of the data-sheet peak, 0.73 for fp8, d the smallest of m, n, k;
e_mem = 0.85 b / (b + 256 KiB) of HBM; plus the launch gap) is from the
matmuls a profile measured. Usage: roofline_vs_measured.py PROFILE CLUSTER.
Prints, per dtype and shape class, the median and the spread of
predicted / measured time (< 1: the roofline is too fast)."""
import statistics
import sys
import tomllib


def roofline_seconds(op, gpu):
    peak = gpu["peak_flops"].get(op["dtype"], gpu["peak_flops"]["fp32"])
    d = min(op["shape"])
    compute = op["flops"] / (peak * (0.73 if op["dtype"] == "fp8" else 0.80) * d / (d + 128))
    memory = op["bytes"] / (gpu["hbm_bandwidth"] * 0.85 * op["bytes"] / (op["bytes"] + 256 * 1024))
    return max(compute, memory) + gpu["launch_overhead"]


def main(profile_path, cluster_path):
    profile = tomllib.load(open(profile_path, "rb"))
    gpu = tomllib.load(open(cluster_path, "rb"))["gpu"]
    classes = {
        "layer-sized (every dim >= 1024)": lambda s: min(s) >= 1024,
        "one dim 64-256 (attention-like)": lambda s: 64 <= min(s) <= 256 and sorted(s)[1] >= 1024,
        "small (two dims <= 512)": lambda s: sorted(s)[1] <= 512,
    }
    print(f"profile {profile_path} ({profile['gpu']}) against the roofline of {cluster_path} ({gpu['name']})")
    print(f"{'dtype':6} {'shapes':32} {'n':>4} {'median':>7} {'p10':>6} {'p90':>6}   predicted / measured time")
    for dtype in ["fp32", "tf32", "fp16", "bf16", "fp8"]:
        ops = [o for o in profile["op"] if o["kind"] == "matmul" and o["dtype"] == dtype]
        if dtype not in gpu["peak_flops"] or not ops:
            continue
        for name, member in classes.items():
            ratios = sorted(roofline_seconds(o, gpu) / o["seconds"] for o in ops if member(o["shape"]))
            if not ratios:
                continue
            q = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else [ratios[0]] * 9
            print(f"{dtype:6} {name:32} {len(ratios):4} {statistics.median(ratios):7.2f} {q[0]:6.2f} {q[-1]:6.2f}")
    print("measured rates (TFLOP/s) at layer shapes tokens x out x in:")
    for shape in ([8192, 4096, 4096], [8192, 16384, 4096], [8192, 4096, 16384], [16384, 8192, 8192],
                  [4096, 1024, 1024], [2048, 2048, 2048]):
        row = []
        for dtype in ["bf16", "fp8"]:
            hit = [o for o in profile["op"] if o["kind"] == "matmul" and o["dtype"] == dtype and o["shape"] == shape]
            if hit:
                o = hit[0]
                row.append(f"{dtype} {o['flops'] / o['seconds'] / 1e12:6.0f} (roofline {o['flops'] / roofline_seconds(o, gpu) / 1e12:4.0f})")
        print(f"  {'x'.join(map(str, shape)):18} " + "   ".join(row))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
