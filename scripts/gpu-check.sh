#!/usr/bin/env bash
# The checks of dstc run's CUDA device on a GPU machine that has CUDA but
# none of dstc's Debian packages (docs/run.md): BUNDLE holds a stripped dstc
# and the shared libraries it links (libcublasLt is found where the machine
# keeps it). Writes what it saw to OUT/gpu-check.log.
# Usage: gpu-check.sh BUNDLE OUT
set -uo pipefail
bundle="$(cd "$1" && pwd)"
out="$2"
log="$out/gpu-check.log"
cublas="$(find / -name 'libcublasLt.so.13' -not -path '*/proc/*' 2>/dev/null | head -n 1)"
export LD_LIBRARY_PATH="$bundle/lib:$(dirname "${cublas:-/usr/local/cuda/lib64/x}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
dstc="$bundle/dstc"
step() {
  echo "\$ dstc $*" | tee -a "$log"
  timeout 240 "$dstc" "$@" >>"$log" 2>&1
  echo "exit $?" | tee -a "$log"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$log" 2>&1
echo "libcublasLt: ${cublas:-not found}" >>"$log"
mlp=(examples/mlp_distir_pipeline.dstrat)
step run --device cuda "${mlp[@]}" -D hidden=64 --check --steps 3
step run --device cuda "${mlp[@]}" --check --steps 5 --trace "$out/mlp_cuda_trace.json"
step run --device cpu "${mlp[@]}" --steps 5
# Every example at its verify size: a pass, or the op the device lacks.
for cmd in tests/golden/verify/*.cmd; do
  read -r -a args <"$cmd"
  [ "${args[0]}" = verify ] && [[ "${args[1]}" == examples/* ]] && grep -qx "=== exit 0" <(head -n 1 "${cmd%.cmd}.expected") ||
    continue
  step run --device cuda "${args[@]:1}" --check --steps 2
done
cat "$log"
