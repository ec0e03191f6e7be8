#!/usr/bin/env bash
# Installs what is missing, builds dstc, and runs the whole test suite.
# With --sanitize: the same in build-asan/ under AddressSanitizer and UBSan.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "${1:-}" = "--sanitize" ]; then
  export DSTC_BUILD_DIR="${DSTC_BUILD_DIR:-$root/build-asan}"
  bash "$root/scripts/build.sh" -DDSTC_SANITIZE=ON -DDSTC_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
else
  export DSTC_BUILD_DIR="${DSTC_BUILD_DIR:-$root/build}"
  bash "$root/scripts/build.sh"
fi
ctest --test-dir "$DSTC_BUILD_DIR" -j "$(nproc)" --output-on-failure --timeout 600
