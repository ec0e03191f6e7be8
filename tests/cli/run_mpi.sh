#!/usr/bin/env bash
# dstc run under mpirun (OpenMPI): ranks as processes match the reference
# executor, for every example strategy at its verify size; a run with the wrong number of ranks, or a malformed launcher
# environment, is refused before any rank starts; a rank that dies ends the
# whole run, with mpirun's message, never a hang.
# Usage: run_mpi.sh DSTC SOURCE_DIR
set -uo pipefail
dstc="$1"
cd "$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
  [ -s "$work/err" ] && sed 's/^/  stderr: /' "$work/err" | head -n 20
}
expect() {  # expect NAME WANTED_STATUS STATUS
  if [ "$3" -ne "$2" ]; then fail "$1: exit $3, wanted $2"; else echo "ok: $1"; fi
}
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"  # OpenMPI keeps its allocations to exit
mpirun=(mpirun --oversubscribe --bind-to none)
gpt2=(examples/gpt2_megatron.dstrat -D layers=2 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64)

"${mpirun[@]}" -np 8 "$dstc" run "${gpt2[@]}" --check >"$work/out" 2>"$work/err"
expect "mpirun -np 8 dstc run --check" 0 $?
grep -q "8 ranks (mpirun processes)" "$work/out" || fail "the run does not say it runs as mpirun processes"
[ "$(grep -c "^check: PASS" "$work/out")" = 1 ] || { fail "not one check: PASS line"; cat "$work/out"; }
[ "$(grep -c "^step 1 " "$work/out")" = 1 ] || fail "rank 0 alone should print each step"

# Every example at its verify size, each on as many processes as its mesh
# has devices (the refusal of a wrong count names it), up to 16: the
# 64-device meshes run as threads (RunCommand.EveryExampleStrategy...), as
# 64 processes would oversubscribe a CI machine's 2 cores 32 times.
examples=0
for cmd in tests/golden/verify/*.cmd; do
  read -r -a args <"$cmd"
  [ "${args[0]}" = verify ] && [[ "${args[1]}" == examples/* ]] && [ "$(head -n 1 "${cmd%.cmd}.expected")" = "=== exit 0" ] ||
    continue
  ranks="$("$dstc" run "${args[@]:1}" --ranks 100000 2>&1 | sed -n 's/.* runs on \([0-9]*\) devices.*/\1/p')"
  [ "${ranks:-1}" -le 16 ] || continue
  "${mpirun[@]}" -np "${ranks:-1}" "$dstc" run "${args[@]:1}" --check --warmup 0 --steps 1 >"$work/out" 2>"$work/err"
  status=$?
  if [ $status -ne 0 ] || ! grep -q "^check: PASS" "$work/out"; then
    fail "mpirun -np ${ranks:-?} dstc run ${args[*]:1}: exit $status"
  fi
  examples=$((examples + 1))
done
[ "$examples" -ge 30 ] || fail "only $examples example commands found"
echo "ok: $examples example strategies under mpirun match the reference"

"${mpirun[@]}" -np 4 "$dstc" run "${gpt2[@]}" >"$work/out" 2>"$work/err"
expect "mpirun -np 4 for an 8-device strategy" 1 $?
grep -q "this run has 4 ranks \[run-rank-count\]" "$work/err" || fail "no run-rank-count error"
grep -q "start it with mpirun -np 8" "$work/err" || fail "no note saying how to start it"
[ "$(grep -c "run-rank-count" "$work/err")" = 1 ] || fail "rank 0 alone should report"

env OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_RANK=9 "$dstc" run "${gpt2[@]}" >"$work/out" 2>"$work/err"
expect "a malformed mpirun environment" 1 $?
grep -q "OMPI_COMM_WORLD_RANK=9 is not a number in \[0, 8)" "$work/err" || fail "no message for the bad rank"

# A rank killed mid-run: every rank ends, and mpirun says which died.
marker=$((RANDOM * 32768 + RANDOM + 1))  # this run's ranks alone: another run may go on beside it
"${mpirun[@]}" -np 2 "$dstc" run examples/mlp_distir_pipeline.dstrat -D hidden=64 --steps 1000000 --seed $marker \
  >/dev/null 2>"$work/err" &
launcher=$!
for _ in $(seq 100); do
  [ "$(pgrep -f "seed $marker" | grep -vx "$launcher" | wc -l)" -ge 2 ] && break
  sleep 0.1
done
sleep 1
victim="$(pgrep -f "dstc run examples/mlp_distir_pipeline.dstrat.*seed $marker" | grep -vx "$launcher" | tail -n 1)"
if [ -z "$victim" ]; then
  fail "no rank process to kill"
  kill "$launcher" 2>/dev/null
else
  kill -9 "$victim"
  for _ in $(seq 300); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$launcher" 2>/dev/null; then
    fail "the run still goes on 30 s after a rank died"
    kill -9 "$launcher"
  fi
  wait "$launcher"
  status=$?
  [ "$status" -ne 0 ] || fail "mpirun exited 0 after a rank died"
  # mpirun names the killed rank; a survivor may be first to report its
  # lost peer, depending on timing: either says which process.
  grep -qi "process" "$work/err" || fail "no message saying which process ended the run"
  for _ in $(seq 50); do pgrep -f "seed $marker" >/dev/null || break; sleep 0.1; done
  pgrep -f "seed $marker" >/dev/null && fail "a rank still runs 5 s after the run ended"
  echo "ok: a killed rank ends the run (exit $status)"
fi

[ "$failures" -eq 0 ] && echo "all passed" || { echo "$failures failed"; exit 1; }
