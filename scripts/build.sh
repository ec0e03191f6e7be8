#!/usr/bin/env bash
# Configures and builds dstc into build/ (or $DSTC_BUILD_DIR).
# Extra arguments go to CMake's configure step, e.g. -DDSTC_SANITIZE=ON.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install-deps.sh"
build="${DSTC_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
