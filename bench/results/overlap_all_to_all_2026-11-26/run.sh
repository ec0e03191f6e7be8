#!/usr/bin/env bash
# Each run with overlap_all_to_all off, then on; from the repository root:
# bash bench/results/overlap_all_to_all_2026-11-26/run.sh > bench/results/overlap_all_to_all_2026-11-26/results.txt
d=bench/results/overlap_all_to_all_2026-11-26
dstc=${DSTC:-build/bin/dstc}
run() {
  for overlap in false true; do
    echo "\$ dstc compile $* -D overlap=$overlap --simulate"
    "$dstc" compile "$@" -D overlap=$overlap --simulate | grep -E "step time|exposed comm|bubble|  compute  |peak"
  done
}
run $d/mixtral_16_experts_2_nodes.dstrat
run $d/deepseek_v3_overlap_param.dstrat -D pp=1 -D dp=2 -D ep=64 -D micro=8 -D batch=1024 -D layers=4 -D dense_layers=1
run $d/deepseek_v3_interleaved.dstrat -D micro=32 -D batch=4096 -D recompute=true
run $d/deepseek_v3_interleaved.dstrat -D micro=96 -D batch=12288
