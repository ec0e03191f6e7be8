#!/usr/bin/env bash
# dstc run under torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR, MASTER_PORT), the ranks started here as torchrun starts
# them: they meet at rank 0 over TCP and match the reference executor; a
# rank that is killed, that fails, or that never comes ends every other
# rank with a message naming it, never a hang.
# Usage: run_torchrun.sh DSTC SOURCE_DIR
set -uo pipefail
dstc="$1"
cd "$2"
work="$(mktemp -d)"
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
  tail -n 5 "$work"/*.err 2>/dev/null | sed 's/^/  /'
}
port=$((20000 + $$ % 20000))
gpt2=(examples/gpt2_megatron.dstrat -D layers=2 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64)

# start_ranks N PORT ARGS...: ranks 0..N-1 in the background, rank r's
# output in $work/r.out and $work/r.err.
start_ranks() {
  local n=$1 p=$2
  shift 2
  pids=()
  for r in $(seq 0 $((n - 1))); do
    env RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$p "$dstc" run "$@" \
      >"$work/$r.out" 2>"$work/$r.err" &
    pids+=($!)
  done
}
# wait_ranks SECONDS: every rank's exit status in $statuses, or "hang".
wait_ranks() {
  statuses=()
  for pid in "${pids[@]}"; do
    for _ in $(seq $((10 * $1))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      statuses+=(hang)
      kill -9 "$pid"
    fi
    wait "$pid"
    statuses+=($?)
  done
}

start_ranks 8 $port "${gpt2[@]}" --check
wait_ranks 60
[ "${statuses[*]}" = "0 0 0 0 0 0 0 0" ] || fail "8 ranks under torchrun: exits ${statuses[*]}"
grep -q "8 ranks (torchrun processes)" "$work/0.out" || fail "rank 0 does not say it runs as torchrun processes"
grep -q "^check: PASS" "$work/0.out" || fail "no check: PASS"
[ -s "$work/3.out" ] && fail "a rank other than 0 printed"
[ "$failures" -eq 0 ] && echo "ok: 8 ranks under torchrun match the reference"

# A rank killed mid-run.
rm -f "$work"/*.err
start_ranks 2 $((port + 1)) examples/mlp_distir_pipeline.dstrat -D hidden=64 --steps 1000000
sleep 2
kill -9 "${pids[1]}"
wait_ranks 30
[ "${statuses[0]}" = 1 ] || fail "rank 0 exited ${statuses[0]} after rank 1 was killed, wanted 1"
grep -q "rank 0: rank 1 closed its connection" "$work/0.err" || fail "rank 0 does not name the killed rank"
echo "ok: a killed rank ends the run"

# A rank that fails: rank 1 runs another model size, so the first
# activation it receives has the wrong size.
rm -f "$work"/*.err
env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2)) "$dstc" run \
  examples/mlp_distir_pipeline.dstrat -D hidden=64 >"$work/0.out" 2>"$work/0.err" &
pids=($!)
env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2)) "$dstc" run \
  examples/mlp_distir_pipeline.dstrat -D hidden=32 >"$work/1.out" 2>"$work/1.err" &
pids+=($!)
wait_ranks 30
[ "${statuses[*]}" = "1 1" ] || fail "ranks of different programs exited ${statuses[*]}, wanted 1 1"
grep -q "rank 1 failed: expected .* elements from rank 0, got" "$work/1.err" || fail "rank 1 does not say what it got"
grep -q "rank 1 closed its connection" "$work/0.err" || fail "rank 0 does not name the failed rank"
echo "ok: a failing rank ends every rank"

# A rank that never comes: rank 0 gives up at the rendezvous.
env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 3)) "$dstc" run \
  examples/mlp_distir_pipeline.dstrat -D hidden=64 --rendezvous-timeout 1 >"$work/0.out" 2>"$work/0.err"
status=$?
[ "$status" = 1 ] || fail "a lone rank 0 exited $status, wanted 1"
grep -q "rank 0 waited 1 s at 127.0.0.1:$((port + 3)) for the other ranks; 1 of 2 came" "$work/0.err" ||
  fail "no message naming the rendezvous"
echo "ok: a missing rank is reported at the rendezvous"

[ "$failures" -eq 0 ] && echo "all passed" || { echo "$failures failed"; exit 1; }
