#!/usr/bin/env bash
# Installs the Debian packages dstc builds with, on Debian 12 (bookworm) or
# later, down to a minimal root (debootstrap --variant=minbase). Idempotent:
# runs apt-get (and its update) only when something is missing. As root it
# runs apt-get itself; otherwise through sudo where sudo exists, and where it
# does not it prints the command to run as root and exits 1.
set -euo pipefail

packages=(
  build-essential cmake ninja-build
  antlr4 libantlr4-runtime-dev
  # libantlr4-runtime-dev's CMake file links libuuid but does not depend on it.
  uuid-dev
  libtomlplusplus-dev libboost-graph-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev
  # dstc run's ranks as processes: the MPI library and mpirun.
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0

install_cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps: these packages are missing: ${missing[*]}" >&2
  echo "install-deps: you are not root and sudo is not installed; run this as root, then run this script again:" >&2
  echo "  $install_cmd" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
