#!/usr/bin/env bash
# A failed write is an error (exit 1) and never leaves a partial file: the
# old content stays. Disk-full is played by RLIMIT_FSIZE with SIGXFSZ
# ignored (writes past the limit fail with EFBIG) and by /dev/full.
# Usage: output_failures.sh DSTC SOURCE_DIR
set -uo pipefail
dstc="$1"
cd "$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
expect() {  # expect NAME WANTED_STATUS STATUS
  if [ "$3" -ne "$2" ]; then echo "FAIL: $1: exit $3, wanted $2"; failures=$((failures + 1)); else echo "ok: $1"; fi
}
limited() { (trap '' XFSZ; ulimit -f "$1"; shift; "$@"); }

# stdout on a full disk
"$dstc" compile examples/gpt2_megatron.dstrat --simulate >/dev/full 2>"$work/err"
expect "compile --simulate > /dev/full" 1 $?
grep -q "cannot write the output" "$work/err" || { echo "FAIL: no message for /dev/full"; failures=$((failures + 1)); }

# --trace and -o past the size limit keep the old file
echo old >"$work/trace.json"
limited 8 "$dstc" compile examples/gpt2_megatron.dstrat --simulate --trace "$work/trace.json" >/dev/null 2>&1
expect "compile --trace past the limit" 1 $?
[ "$(cat "$work/trace.json")" = old ] || { echo "FAIL: the trace file was changed"; failures=$((failures + 1)); }
echo old >"$work/out.ir"
limited 8 "$dstc" compile examples/gpt2_megatron.dstrat --emit=ir -o "$work/out.ir" >/dev/null 2>&1
expect "compile -o past the limit" 1 $?
[ "$(cat "$work/out.ir")" = old ] || { echo "FAIL: the -o file was changed"; failures=$((failures + 1)); }

# fmt -i of a 3.5 KB file with a 1 KiB limit leaves the file whole
{ sed 's/^strategy /strategy  /' examples/gpt3_175b_megatron.dstrat; for i in $(seq 60); do echo "// padding line $i"; done; } >"$work/big.dstrat"
cp "$work/big.dstrat" "$work/big.orig"
limited 1 "$dstc" fmt -i "$work/big.dstrat" 2>/dev/null
expect "fmt -i past the limit" 1 $?
cmp -s "$work/big.dstrat" "$work/big.orig" || { echo "FAIL: fmt -i changed the file"; failures=$((failures + 1)); }

# search outputs to a folder that does not exist
"$dstc" search examples/search_mlp_distir.dstrat --search MLP1B --csv "$work/none/x.csv" >/dev/null 2>&1
expect "search --csv into a missing folder" 1 $?

# no temporary file is left behind
leftover="$(find "$work" -name '.*.dstc-*')"
[ -z "$leftover" ] || { echo "FAIL: temporary files left: $leftover"; failures=$((failures + 1)); }

# an empty path is a usage error
"$dstc" compile examples/gpt2_megatron.dstrat -o '' >/dev/null 2>&1
expect "compile -o ''" 2 $?
exit $((failures > 0))
