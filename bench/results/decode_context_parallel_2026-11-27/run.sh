#!/bin/bash
# Llama 3 8B decode steps with the KV cache split by position over cp
# nodes (examples/llama3_8b_serving.dstrat, Llama3_8B_LongContextDecode):
# cp 1, 2 and 4 DGX H100 nodes, tp 8 in each, at 128K and 1M cached
# positions, batches 1 and 8. Run from the repository root.
set -euo pipefail
out=$(dirname "$0")
for context in 131072 1048576; do
  for batch in 1 8; do
    for cp in 1 2 4; do
      ./build/bin/dstc compile examples/llama3_8b_serving.dstrat --strategy Llama3_8B_LongContextDecode \
        -D cp=$cp -D batch=$batch -D context=$context --simulate > "$out/ctx${context}_b${batch}_cp${cp}.txt"
    done
  done
done
# A context-parallel prefill of one long prompt, with each cp rank storing
# its share of the cache (split=1) or the whole cache (split=0).
for prompt in 131072 1048576; do
  for split in 0 1; do
    ./build/bin/dstc compile "$out/llama3_8b_prefill_cp.dstrat" -D cp=4 -D prompt=$prompt -D split=$split --simulate \
      > "$out/prefill_${prompt}_cp4_split${split}.txt"
  done
done
