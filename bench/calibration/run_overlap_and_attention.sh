#!/usr/bin/env bash
# On a GPU machine (docs/run.md): what a kernel holding SMs does to the
# compute beside it (bench/cuda/comm_sm_contention.cu), the kernels of fused
# attention's forward and backward (torch_attention_kernels.py), then
# scripts/gpu-check.sh. BUNDLE is what scripts/gpu-bundle.sh makes.
# Usage: run_overlap_and_attention.sh BUNDLE OUT
set -uo pipefail
bundle="$(cd "$1" && pwd)"
out="$2"
mkdir -p "$out"
here="$(dirname "$0")"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
cublas="$(find / -name 'libcublasLt.so.13' -not -path '*/proc/*' 2>/dev/null | head -n 1)"
LD_LIBRARY_PATH="$bundle/lib:$(dirname "${cublas:-/usr/local/cuda/lib64/x}")" timeout 180 \
  "$bundle/dstc_comm_sm_contention" >"$out/comm_sm_contention.tsv" 2>&1
echo "contention exit $?"
timeout 150 python3 "$here/torch_attention_kernels.py" >"$out/torch_attention_kernels.jsonl" 2>&1
echo "attention exit $?"
timeout 240 "$here/../../scripts/gpu-check.sh" "$bundle" "$out" >/dev/null 2>&1
echo "gpu-check exit $?"
grep -c "^exit 0" "$out/gpu-check.log"
grep -B1 "^exit [1-9]" "$out/gpu-check.log" | head -20
