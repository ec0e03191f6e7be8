#!/bin/bash
# Simulates the training examples whose compute overlaps gradient
# collectives or expert all-to-alls, with the binary given as $1 (default
# ./build/bin/dstc), from the repository root; prints one line per run:
# name, step time (s), tokens/s per GPU, exposed communication (s), peak GiB.
set -euo pipefail
DSTC=${1:-./build/bin/dstc}
run() {
  local name=$1; shift
  "$DSTC" compile "$@" --simulate --format json |
    python3 -c "import json,sys; r=json.load(sys.stdin); s=r.get('simulation', r); \
n=s['num_devices']; b=s['breakdown']; \
print(f\"{sys.argv[1]:<34} step {s['step_time_s']:9.4f} s  tokens/s/GPU {s['tokens_per_s']/n:9.1f}  exposed comm {b['exposed_comm_s']:7.3f} s  peak {max(s['peak_memory_bytes'])/2**30:6.1f} GiB\")" "$name"
}
run nemo_cp_llama3_8b examples/accuracy/nemo_context_parallel.dstrat --strategy Llama3_8B_CP2
run nemo_cp_llama3_70b examples/accuracy/nemo_context_parallel.dstrat --strategy Llama3_70B_CP2
run nemo_fp8_llama3_8b_fsdp examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_8B_FSDP_FP8
run nemo_fp8_llama3_70b examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_70B_FP8
run mixtral_8x7b_megatron examples/mixtral_8x7b_megatron.dstrat --strategy Mixtral8x7B_Megatron
run qwen3_30b_a3b_16_h100 examples/accuracy/nemo_qwen3_moe.dstrat --strategy Qwen3_30B_A3B_16_H100
run qwen3_30b_a3b_16_h100_overlap examples/accuracy/nemo_qwen3_moe.dstrat --strategy Qwen3_30B_A3B_16_H100 -D overlap=true
run deepseek_v3_deepep_node_limited bench/results/deepep_dispatch_2026-11-27/deepseek_v3_2048_gpus_deepep.dstrat --strategy DeepSeekV3_2048 -D recompute=true
