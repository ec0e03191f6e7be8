#!/bin/bash
# Llama 3 8B decode on one H100, bf16 against FP8 serving, over batches
# and contexts; the binary as built, before (fp8 weights quantized each
# step) and after (stored in e4m3) this change. Run from the repository root.
set -euo pipefail
out=$(dirname "$0")
for batch in 1 16 64; do
  for context in 2048 32768; do
    for fp8 in 0 1; do
      ./build/bin/dstc compile "$out/llama3_8b_decode_fp8.dstrat" -D batch=$batch -D context=$context -D fp8=$fp8 \
        --simulate > "$out/b${batch}_ctx${context}_fp8${fp8}.txt"
    done
  done
done
