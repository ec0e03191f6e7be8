#!/usr/bin/env bash
# dstc run's CUDA device on a lent GPU, from the repository root with $OUT
# set and the bundle of scripts/gpu-bundle.sh in gpu_bundle/: every example
# strategy's --check (scripts/gpu-check.sh), then GPT-2 117M (batch 8 x
# 1024) timed with f32, TF32 and bf16 GEMMs, one traced step, and PyTorch
# eager on the same GPU in bf16, f32 and TF32; then GPT-2 1.5B at batch 4
# (f32 storage needs 4 bytes a value) with TF32 GEMMs, both. Each command
# has its own time limit, so one failure leaves the rest.
export PYTHONUNBUFFERED=1
root="$(pwd)"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
timeout 200 bash scripts/gpu-check.sh gpu_bundle "$OUT" > /dev/null 2>&1
echo "gpu-check: exit $?" >> "$OUT/gpu-check.log"
cublas="$(find / -name 'libcublasLt.so.13' -not -path '*/proc/*' 2>/dev/null | head -n 1)"
export LD_LIBRARY_PATH="$root/gpu_bundle/lib:$(dirname "${cublas:-/x/x}")"
gpt2=bench/results/single_gpu_gpt2_2026-11-26/gpt2_1_gpu.dstrat
for precision in f32 tf32 bf16; do
  { echo "\$ dstc run --device cuda $gpt2 --gemm-precision $precision --steps 5"
    timeout 60 gpu_bundle/dstc run --device cuda "$gpt2" --gemm-precision "$precision" --steps 5 2>&1
    echo "exit $?"; } >> "$OUT/gpt2_117m_cuda.log"
done
{ echo "\$ dstc run --device cuda $gpt2 --gemm-precision tf32 --steps 1 --trace"
  timeout 60 gpu_bundle/dstc run --device cuda "$gpt2" --gemm-precision tf32 --steps 1 --warmup 1 \
    --trace "$OUT/gpt2_117m_cuda_trace.json" 2>&1
  echo "exit $?"; } >> "$OUT/gpt2_117m_cuda.log"
large=(-D hidden=1600 -D heads=25 -D layers=48 -D batch=4)
{ echo "\$ dstc run --device cuda $gpt2 ${large[*]} --gemm-precision tf32 --steps 3"
  timeout 120 gpu_bundle/dstc run --device cuda "$gpt2" "${large[@]}" --gemm-precision tf32 --steps 3 2>&1
  echo "exit $?"; } >> "$OUT/gpt2_1_5b_cuda.log"
cd bench/calibration || exit 1
timeout 120 python3 torch_gpt2_step.py --hidden 1600 --heads 25 --layers 48 --batch 4 --dtype tf32 \
  >> "$OUT/torch_gpt2_step.jsonl" 2>> "$OUT/torch_errors.txt"
for dtype in bf16 f32 tf32; do
  timeout 90 python3 torch_gpt2_step.py --batch 8 --dtype "$dtype" >> "$OUT/torch_gpt2_step.jsonl" 2>> "$OUT/torch_errors.txt"
done
cat "$OUT/gpt2_117m_cuda.log" "$OUT/gpt2_1_5b_cuda.log" "$OUT/torch_gpt2_step.jsonl"
tail -n 40 "$OUT/gpu-check.log"
