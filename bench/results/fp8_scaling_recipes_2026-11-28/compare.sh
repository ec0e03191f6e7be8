#!/usr/bin/env bash
# The FP8 examples simulated by the binary before per-row and per-block
# scales were priced (OLD) and after (NEW): step time, throughput, memory.
# Usage: compare.sh OLD NEW OUT_DIR (from the repository root)
old="$1" new="$2" out="$3"
run() {  # name, then the compile arguments
  local name="$1"; shift
  for which in old new; do
    local bin="$old"; [ "$which" = new ] && bin="$new"
    "$bin" compile "$@" --simulate 2>&1 | grep -E "step time|throughput|peak|at peak" > "$out/${name}_${which}.txt"
  done
}
ds=bench/results/dualpipe_v_2026-11-27
run deepseek_1f1b_blockwise $ds/deepseek_v3_1f1b_fp8.dstrat --strategy DeepSeekV3_2048 -D recompute=true -D micro=48 -D batch=6144
run deepseek_dualpipe_v_blockwise $ds/deepseek_v3_dualpipe_v_overlap_fp8.dstrat --strategy DeepSeekV3_2048 -D recompute=true -D micro=48 -D batch=6144
run llama3_8b_fsdp_tensorwise examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_8B_FSDP_FP8
run llama3_8b_fsdp_rowwise examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_8B_FSDP_FP8 -D fp8=rowwise
run llama3_8b_fsdp_blockwise examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_8B_FSDP_FP8 -D fp8=blockwise
run llama3_70b_tensorwise examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_70B_FP8
run llama3_70b_blockwise examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_70B_FP8 -D fp8=blockwise
