#!/usr/bin/env bash
# Installs what is missing, builds dstc, and runs the main job on a bundled
# example. Pass other dstc arguments to run those instead.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/build.sh"
cd "$root"
if [ $# -eq 0 ]; then
  set -- --help
fi
exec "$root/build/bin/dstc" "$@"
