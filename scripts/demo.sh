#!/usr/bin/env bash
# Installs what is missing, builds dstc, and runs the main job on a bundled
# example: compile GPT-2 with Megatron-LM tensor parallelism on a DGX A100
# and predict its step time, throughput and memory. Pass other dstc
# arguments to run those instead.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/build.sh" --target dstc
cd "$root"
if [ $# -eq 0 ]; then
  set -- compile examples/gpt2_megatron.dstrat --simulate
fi
exec "$root/build/bin/dstc" "$@"
