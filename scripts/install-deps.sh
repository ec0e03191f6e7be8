#!/usr/bin/env bash
# Installs the Debian packages dstc builds with. Idempotent: runs apt-get
# (and its update) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build
  antlr4 libantlr4-runtime-dev
  libtomlplusplus-dev libboost-graph-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
