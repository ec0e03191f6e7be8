#!/usr/bin/env bash
# dstc run's fused attention (backends/cuda/flash_attention.cu) on a lent
# GPU, from the repository root with $OUT set and the bundle of
# scripts/gpu-bundle.sh in gpu_bundle/. First --check at head dims the
# fused kernels take (64: GPT-2 under Megatron TP, 96 tokens so the last
# tile is ragged; 128: Llama 3 with grouped queries under context
# parallelism, so each rank's queries start mid-sequence), with TF32 and
# bf16 products; stops there if one fails. Then GPT-2 117M and 1.5B timed
# with TF32 GEMMs, a traced 117M step, and PyTorch eager at TF32 on the
# same GPU.
export PYTHONUNBUFFERED=1
root="$(pwd)"
cublas="$(find / -name 'libcublasLt.so.13' -not -path '*/proc/*' 2>/dev/null | head -n 1)"
export LD_LIBRARY_PATH="$root/gpu_bundle/lib:$(dirname "${cublas:-/x/x}")"
log="$OUT/flash_attention_check.log"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
check() {
  echo "\$ dstc run --device cuda $*" >> "$log"
  timeout 120 gpu_bundle/dstc run --device cuda "$@" --check --steps 2 >> "$log" 2>&1
  local rc=$?
  echo "exit $rc" >> "$log"
  return $rc
}
gpt2_small=(examples/gpt2_megatron.dstrat -D layers=1 -D hidden=256 -D heads=4 -D seq=96 -D vocab=64)
llama_cp=(tests/golden/verify/context_parallel.dstrat -D hidden=512 -D heads=4 -D kv_heads=2 -D seq=96 -D ffn=64)
ok=0
check "${gpt2_small[@]}" --gemm-precision tf32 || ok=1
check "${llama_cp[@]}" --gemm-precision tf32 || ok=1
check "${llama_cp[@]}" --gemm-precision bf16 || ok=1
if [ $ok -ne 0 ]; then cat "$log"; exit 1; fi
gpt2=bench/results/single_gpu_gpt2_2026-11-26/gpt2_1_gpu.dstrat
{ echo "\$ dstc run --device cuda $gpt2 --gemm-precision tf32 --steps 5"
  timeout 60 gpu_bundle/dstc run --device cuda "$gpt2" --gemm-precision tf32 --steps 5 2>&1
  echo "exit $?"
  echo "\$ dstc run --device cuda $gpt2 --gemm-precision tf32 --steps 1 --trace"
  timeout 60 gpu_bundle/dstc run --device cuda "$gpt2" --gemm-precision tf32 --steps 1 --warmup 1 \
    --trace "$OUT/gpt2_117m_tf32_trace.json" 2>&1
  echo "exit $?"; } >> "$OUT/gpt2_117m_cuda.log"
python3 bench/calibration/trace_op_totals.py "$OUT/gpt2_117m_tf32_trace.json" > "$OUT/gpt2_117m_tf32_op_totals.txt" 2>&1
rm -f "$OUT/gpt2_117m_tf32_trace.json"
large=(-D hidden=1600 -D heads=25 -D layers=48 -D batch=4)
{ echo "\$ dstc run --device cuda $gpt2 ${large[*]} --gemm-precision tf32 --steps 3"
  timeout 150 gpu_bundle/dstc run --device cuda "$gpt2" "${large[@]}" --gemm-precision tf32 --steps 3 2>&1
  echo "exit $?"; } >> "$OUT/gpt2_1_5b_cuda.log"
cd bench/calibration || exit 1
timeout 90 python3 torch_gpt2_step.py --batch 8 --dtype tf32 >> "$OUT/torch_gpt2_step.jsonl" 2>> "$OUT/torch_errors.txt"
timeout 120 python3 torch_gpt2_step.py --hidden 1600 --heads 25 --layers 48 --batch 4 --dtype tf32 \
  >> "$OUT/torch_gpt2_step.jsonl" 2>> "$OUT/torch_errors.txt"
cd "$root" || exit 1
cat "$log" "$OUT/gpt2_117m_cuda.log" "$OUT/gpt2_117m_tf32_op_totals.txt" "$OUT/gpt2_1_5b_cuda.log" "$OUT/torch_gpt2_step.jsonl"
