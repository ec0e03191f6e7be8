#!/usr/bin/env python3
"""Time per IR op kind and phase in a `dstc run --trace` (or `compile
--simulate --trace`) Chrome trace: count and total milliseconds, largest
first. Usage: trace_op_totals.py TRACE [ROWS]"""
import collections
import json
import sys


def main():
    events = json.load(open(sys.argv[1]))["traceEvents"]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    totals = collections.defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("ph") != "X":
            continue
        kind = e.get("args", {}).get("ir", "?").split(" ")[0]
        key = f"{kind} ({e.get('cat', '')})"
        totals[key][0] += 1
        totals[key][1] += e["dur"]
    print(f"{'op (phase)':40s} {'count':>5s} {'ms':>8s}")
    print(f"{'all':40s} {sum(c for c, _ in totals.values()):5d} {sum(t for _, t in totals.values()) / 1e3:8.2f}")
    for key, (count, us) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:rows]:
        print(f"{key:40s} {count:5d} {us / 1e3:8.2f}")


if __name__ == "__main__":
    main()
