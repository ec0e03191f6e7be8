#!/usr/bin/env bash
# Installs what is missing, then configures and builds dstc into build/ (or
# $DSTC_BUILD_DIR). Usage: scripts/build.sh [--target T]... [CMAKE_ARGS...]
# --target builds only that target (scripts/demo.sh builds just dstc); other
# arguments go to CMake's configure step, e.g. -DDSTC_SANITIZE=ON.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
targets=()
configure_args=()
while (($#)); do
  case "$1" in
    --target) targets+=(--target "$2"); shift 2 ;;
    *) configure_args+=("$1"); shift ;;
  esac
done
bash "$root/scripts/install-deps.sh"
build="${DSTC_BUILD_DIR:-$root/build}"
# The configure step's output ends with dstc's summary: what is built.
cmake -S "$root" -B "$build" -G Ninja "${configure_args[@]}"
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
