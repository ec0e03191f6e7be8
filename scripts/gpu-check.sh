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
# The CUDA device computes in f32, so a verify run in f64 runs in f32 here.
for cmd in tests/golden/verify/*.cmd; do
  read -r -a args <"$cmd"
  [ "${args[0]}" = verify ] && [[ "${args[1]}" == examples/* ]] && grep -qx "=== exit 0" <(head -n 1 "${cmd%.cmd}.expected") ||
    continue
  run_args=()
  for ((i = 1; i < ${#args[@]}; ++i)); do
    if [ "${args[i]}" = --arithmetic ]; then ((++i)); else run_args+=("${args[i]}"); fi
  done
  step run --device cuda "${run_args[@]}" --check --steps 2
done
# Ranks as processes, as torchrun starts them (TCP between them, one GPU).
echo "\$ 8 processes with torchrun's variables: dstc run --device cuda gpt2_megatron --check" | tee -a "$log"
for r in $(seq 0 7); do
  env RANK=$r WORLD_SIZE=8 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 timeout 240 "$dstc" run \
    --device cuda examples/gpt2_megatron.dstrat -D layers=2 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64 --check \
    >"$out/rank$r.log" 2>&1 &
done
wait
cat "$out/rank0.log" >>"$log"
cat "$out"/rank[1-7].log >>"$log"
rm -f "$out"/rank*.log
cat "$log"
