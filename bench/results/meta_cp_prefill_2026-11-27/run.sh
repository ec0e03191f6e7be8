#!/bin/bash
# Meta's Llama 3 405B context-parallel prefill rows (TTFT, batch 1),
# simulated with examples/accuracy/meta_context_parallel_inference.dstrat.
# Run from the repository root.
set -euo pipefail
out=$(dirname "$0")
example=examples/accuracy/meta_context_parallel_inference.dstrat
for row in "1 8192" "1 32768" "1 131072" "2 8192" "2 32768" "2 131072" "4 131072" "8 131072" "16 131072" "16 1048576"; do
  set -- $row
  ./build/bin/dstc compile $example -D cp=$1 -D prompt=$2 --simulate > "$out/cp$1_prompt$2.txt"
done
