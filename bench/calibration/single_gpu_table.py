#!/usr/bin/env python3
"""The comparison tables of bench/results/single_gpu_{moe,gpt2}_2026-11-26/:
each measured step (torch_moe_step.py, torch_gpt2_step.py JSON lines) beside
dstc's prediction of the same run, from the data sheet and with the H100
profile. Usage: single_gpu_table.py RESULTS_DIR [DSTC]; run from anywhere."""
import json
import pathlib
import subprocess
import sys

GIB = 1 << 30


def dstc_args(record):
    """-D settings of the folder's strategy for a measured run, or None where
    dstc has no counterpart (one GEMM per expert in a Python loop)."""
    if "routing" in record:
        if record["routing"] == "dropless" and record["experts"] == "loop":
            return None
        capacity = record["seq"] * 2 // 8 if record["routing"] == "capacity" else record["seq"]
        return [f"layers={record['layers']}", f"capacity={capacity}"]
    return [f"batch={record['batch']}", f"hidden={record['hidden']}", f"heads={record['heads']}",
            f"layers={record['layers']}"]


def label(record):
    if "routing" in record:
        how = "capacity factor 1" if record["routing"] == "capacity" else f"dropless, {record['experts']} experts"
        return f"{record['layers']} layers, {how}"
    return f"{record['parameters'] / 1e9:.2f} B parameters, batch {record['batch']}"


def simulate(dstc, strategy, args, profile):
    command = [dstc, "compile", strategy.name, "--simulate", "--format", "json"]
    for a in args:
        command += ["-D", a]
    if profile:
        command += ["--profile", "profiles/h100-sxm.toml"]
    out = subprocess.run(command, cwd=strategy.parent, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    folder = pathlib.Path(sys.argv[1])
    dstc = str(pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "build/bin/dstc").resolve())
    strategy = next(folder.glob("*.dstrat"))
    print("| run | measured step (fwd+bwd, optimizer) | dstc, data sheet | dstc, H100 profile | peak memory measured / dstc |")
    print("| --- | --- | --- | --- | --- |")
    for path in sorted(folder.glob("torch_*_step*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "step_s" not in record:
                continue
            measured = record["step_s"]
            cells = [f"{label(record)} ({path.name})",
                     f"{measured * 1e3:.1f} ms ({record['forward_backward_s'] * 1e3:.1f}, {record['optimizer_s'] * 1e3:.1f})"]
            args = dstc_args(record)
            if args is None:
                cells += ["not modelled", "not modelled", f"{record['peak_memory_bytes'] / GIB:.1f} / -"]
            else:
                sheet, profiled = simulate(dstc, strategy, args, False), simulate(dstc, strategy, args, True)
                for report in (sheet, profiled):
                    t = report["step_time_s"]
                    cells.append(f"{t * 1e3:.1f} ms ({(t / measured - 1) * 100:+.1f} %)")
                cells.append(f"{record['peak_memory_bytes'] / GIB:.1f} / {max(sheet['peak_memory_bytes']) / GIB:.1f} GiB")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
