#!/usr/bin/env bash
# The device check of 2026-11-26 (session 12), run from the repository root
# on a lent GPU with $OUT set: expert GEMMs, Mixtral-shaped MoE training
# steps (capacity and dropless routing), GPT-2 117M and 1.5B training steps,
# each in its own process with a time limit so that one failure leaves the
# rest. Results: bench/results/single_gpu_moe_2026-11-26/ and
# bench/results/single_gpu_gpt2_2026-11-26/.
cd "$(dirname "$0")" || exit 1
export PYTHONUNBUFFERED=1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
step() { # FILE SCRIPT ARGS...: one JSON line into FILE, or the error
  local file=$1; shift
  timeout 150 python3 "$@" >> "$OUT/$file" 2> "$OUT/last_error.txt" \
    || echo "{\"failed\": \"$*\", \"error\": $(tail -c 600 "$OUT/last_error.txt" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}" >> "$OUT/$file"
}
step torch_moe_step.jsonl torch_moe_step.py --layers 1 --routing capacity
step torch_moe_step.jsonl torch_moe_step.py --layers 2 --routing capacity
step torch_moe_step.jsonl torch_moe_step.py --layers 2 --routing dropless --experts grouped
step torch_moe_step.jsonl torch_moe_step.py --layers 2 --routing dropless --experts loop
step torch_gpt2_step.jsonl torch_gpt2_step.py --batch 8
step torch_gpt2_step.jsonl torch_gpt2_step.py --batch 16
step torch_gpt2_step.jsonl torch_gpt2_step.py --hidden 1600 --heads 25 --layers 48 --batch 8
step torch_expert_gemms.jsonl torch_expert_gemms.py
cat "$OUT"/*.jsonl
