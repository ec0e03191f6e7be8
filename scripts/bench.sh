#!/usr/bin/env bash
# Builds dstc (Release) and runs the benchmarks; prints the figures and
# records them as JSON in bench/results/. Extra arguments go to the
# benchmark binary, e.g. --benchmark_filter=Parse.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export DSTC_BUILD_DIR="${DSTC_BUILD_DIR:-$root/build-release}"
bash "$root/scripts/build.sh" -DCMAKE_BUILD_TYPE=Release -DDSTC_BUILD_TESTS=OFF
mkdir -p "$root/bench/results"
"$DSTC_BUILD_DIR/bin/dstc_bench" --benchmark_out="$root/bench/results/dstc_bench.json" \
  --benchmark_out_format=json "$@"
echo "recorded in bench/results/dstc_bench.json"
