#!/usr/bin/env bash
# Proves the README's set-up on a fresh machine: bootstraps a minimal Debian
# 12 root (debootstrap --variant=minbase, from the mirror apt already uses),
# clones this repository's committed HEAD into it, and runs there, as root,
# the commands of the README's "Two commands" block exactly as written. First
# it checks that scripts/install-deps.sh, run by a user without sudo, names
# the command to run as root and fails.
#
# Needs root (debootstrap, chroot, mount) and git. The bootstrapped base is
# cached as a tarball in $DSTC_FRESH_CACHE (default /var/cache/dstc-fresh);
# every run unpacks a new root from it, so no installed package and no build
# carries over from one run to the next. DSTC_FRESH_KEEP=1 keeps the root.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${DSTC_FRESH_CACHE:-/var/cache/dstc-fresh}"
suite=bookworm

say() { echo "fresh-machine-check: $*"; }
[ "$(id -u)" -eq 0 ] || { say "must run as root (debootstrap, chroot)" >&2; exit 2; }

# The README's two commands, read from its "Two commands" block.
mapfile -t commands < <(awk '/^## Two commands/ {section = 1}
  section && /^```sh/ {block = 1; next}
  block && /^```/ {exit}
  block {sub(/[ \t]*#.*/, ""); if ($0 != "") print}' "$root/README.md")
((${#commands[@]})) || { say "no commands found in README.md's \"Two commands\" block" >&2; exit 1; }

mirror="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)"
[ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)"
mirror="${mirror:-http://deb.debian.org/debian}"

base="$cache/$suite-minbase.tar"
if [ ! -s "$base" ]; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  say "bootstrapping a minimal $suite root from $mirror (cached in $base)"
  mkdir -p "$cache"
  staging="$(mktemp -d "$cache/staging.XXXXXX")"
  debootstrap --variant=minbase "$suite" "$staging" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log" >&2; rm -rf "$staging"; exit 1; }
  tar -C "$staging" -cf "$base.partial" . && mv "$base.partial" "$base"
  rm -rf "$staging"
fi

fresh="$(mktemp -d "${TMPDIR:-/tmp}/dstc-fresh.XXXXXX")"
cleanup() {
  for m in dev/pts dev sys proc; do umount -l "$fresh/$m" 2>/dev/null || true; done
  if [ "${DSTC_FRESH_KEEP:-0}" = 1 ]; then say "kept $fresh"; else rm -rf "$fresh"; fi
}
trap cleanup EXIT
tar -C "$fresh" -xf "$base"
chmod 755 "$fresh"  # mktemp (and the tarball's ".") make it 0700; every user walks through it
mount -t proc proc "$fresh/proc"
mount -t sysfs sysfs "$fresh/sys"
mount --bind /dev "$fresh/dev"
mount --bind /dev/pts "$fresh/dev/pts"
cp /etc/resolv.conf "$fresh/etc/resolv.conf"
git clone --quiet --no-hardlinks "$root" "$fresh/root/dstc"
say "testing $(git -C "$root" rev-parse --short HEAD) in a fresh $suite root"

# A user without sudo must be told what to run as root, and fail.
in_root() { chroot "$fresh" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
set +e
cp "$fresh/root/dstc/scripts/install-deps.sh" "$fresh/tmp/install-deps.sh"  # /root is not readable by others
message="$(in_root setpriv --reuid=65534 --regid=65534 --clear-groups /bin/bash /tmp/install-deps.sh 2>&1)"
status=$?
set -e
if [ $status -eq 0 ] || ! grep -q "run this as root" <<<"$message" || ! grep -q "apt-get install" <<<"$message"; then
  say "install-deps.sh without root or sudo should print the apt-get command to run as root and fail; it exited $status with:" >&2
  echo "$message" >&2
  exit 1
fi

for command in "${commands[@]}"; do
  say "\$ $command"
  in_root /bin/bash -c "cd /root/dstc && $command"
done
say "passed: the README's commands work on a fresh $suite root"
