#!/usr/bin/env bash
# The third device check of 2026-11-26 (session 12): Llama 3 8B layers in
# bf16 and with FP8 linear layers (bench/results/single_gpu_fp8_2026-11-26/).
cd "$(dirname "$0")" || exit 1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/nvidia-smi.txt" 2>&1
timeout 200 python3 torch_fp8_llama_step.py --layers 4 > "$OUT/torch_fp8_llama_step.jsonl" 2> "$OUT/errors.txt"
timeout 150 python3 torch_fp8_llama_step.py --layers 2 >> "$OUT/torch_fp8_llama_step.jsonl" 2>> "$OUT/errors.txt"
cat "$OUT/torch_fp8_llama_step.jsonl"; tail -20 "$OUT/errors.txt"
