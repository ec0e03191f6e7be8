#!/usr/bin/env bash
# Builds a folder a GPU machine that has CUDA but none of dstc's Debian
# packages can run dstc from (docs/run.md): a stripped dstc and the shared
# libraries `ldd` lists for it, less the C library's own (every Linux has
# them) and cuBLASLt (the GPU machine's CUDA has it; scripts/gpu-check.sh
# finds it there).
# Usage: gpu-bundle.sh BUILD_DIR BUNDLE
set -euo pipefail
build="$1"
bundle="$2"
rm -rf "$bundle"
mkdir -p "$bundle/lib"
strip -o "$bundle/dstc" "$build/bin/dstc"
# The benchmarks of bench/cuda/, where the build has them.
for bench in dstc_step_kernel_bandwidth dstc_comm_sm_contention; do
  if [ -x "$build/bin/$bench" ]; then strip -o "$bundle/$bench" "$build/bin/$bench"; fi
done
ldd "$build/bin/dstc" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
  case "$name" in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | libcublasLt.so.*) ;;
    *) cp -L "$path" "$bundle/lib/$name" ;;
  esac
done
du -sh "$bundle"
