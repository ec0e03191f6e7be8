#!/usr/bin/env bash
# The second device check of 2026-11-26 (session 12): the kernels of the
# single-GPU MoE and GPT-2 steps that run_moe_and_gpt2_steps.sh timed, to
# place the gaps to dstc's predictions (bench/results/single_gpu_*_2026-11-26/).
cd "$(dirname "$0")" || exit 1
export PYTHONUNBUFFERED=1
run() { # NAME SCRIPT ARGS...
  local name=$1; shift
  timeout 150 python3 "$@" --profile "$OUT/$name.txt" >> "$OUT/steps.jsonl" 2>> "$OUT/errors.txt" || echo "failed: $name" >> "$OUT/errors.txt"
}
run moe_capacity_1_layer torch_moe_step.py --layers 1 --routing capacity
run moe_dropless_grouped_1_layer torch_moe_step.py --layers 1 --routing dropless --experts grouped
run gpt2_117m_batch_8 torch_gpt2_step.py --batch 8
run gpt2_1_5b_batch_8 torch_gpt2_step.py --hidden 1600 --heads 25 --layers 48 --batch 8
cat "$OUT/steps.jsonl" "$OUT/errors.txt"; head -c 3000 "$OUT/moe_capacity_1_layer.txt"
