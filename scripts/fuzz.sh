#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -DDSTC_FUZZ=ON: ASan, UBSan and
# coverage on every library) in build-fuzz/ and runs each for SECONDS,
# seeded with the repository's own files of that kind. Prints a table of
# executions and findings; with --record, also writes it to
# bench/results/fuzz-DATE.md. Crashers land in build-fuzz/crashers/TARGET/:
# keep each, once fixed, as a golden test of its input kind.
# Usage: scripts/fuzz.sh [SECONDS] [--record]   (default 60 s per target)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=60 record=0
for arg in "$@"; do
  case "$arg" in
    --record) record=1 ;;
    *) seconds="$arg" ;;
  esac
done
out="$root/build-fuzz"
mkdir -p "$out"
cmake -S "$root" -B "$out" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDSTC_FUZZ=ON \
  -DDSTC_BUILD_TESTS=OFF -DDSTC_BUILD_BENCH=OFF > "$out/configure.log" || { cat "$out/configure.log"; exit 1; }
cmake --build "$out" --target dstc_fuzz_targets -j "$(nproc)"

# seed TARGET FILES...: a fresh corpus of the repository's files of that kind.
seed() {
  local target="$1"
  shift
  rm -rf "$out/corpus/$target" && mkdir -p "$out/corpus/$target" "$out/crashers/$target"
  [ "$#" -eq 0 ] || cp "$@" "$out/corpus/$target/"
}
mapfile -t dstrat < <(find "$root/examples" "$root/stdlib" "$root/tests/golden" -name '*.dstrat')
mapfile -t toml < <(find "$root/stdlib/clusters" "$root/tests/golden" -name '*.toml')
mapfile -t ir < <(find "$root/tests/golden" -name '*.ir')
seed frontend_fuzz "${dstrat[@]}"
seed cluster_fuzz "${toml[@]}"
seed ir_parser_fuzz "${ir[@]}"
# A schedule table's first three bytes choose ranks, chunks and
# micro-batches (schedule_table_fuzz.cpp): 4 ranks, 1 chunk, 8 micro-batches.
seed schedule_table_fuzz
for csv in $(find "$root/tests/golden" -name '*.csv'); do
  { printf '\003\000\007'; cat "$csv"; } > "$out/corpus/schedule_table_fuzz/$(basename "$csv")"
done

table="| target | seconds | executions | executions/s | corpus | findings |
| --- | --- | --- | --- | --- | --- |"
for target in frontend_fuzz cluster_fuzz ir_parser_fuzz schedule_table_fuzz; do
  log="$out/$target.log"
  status=0
  (cd "$out" && ASAN_OPTIONS=detect_leaks=1 "./fuzz/$target" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
     -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/crashers/$target/" "$out/corpus/$target") \
    > "$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(ls "$out/corpus/$target" | wc -l)
  findings=$(ls "$out/crashers/$target" | wc -l)
  [ "$status" -eq 0 ] || findings="$findings (exit $status, see $log)"
  table="$table
| $target | $seconds | ${runs:-?} | ${rate:-?} | $corpus | $findings |"
done
echo "$table"
if [ "$record" -eq 1 ]; then
  file="$root/bench/results/fuzz-$(date +%Y-%m-%d).md"
  {
    echo "# Fuzzing, $(date +%Y-%m-%d), commit $(git -C "$root" rev-parse --short HEAD)"
    echo
    echo "\`scripts/fuzz.sh $seconds --record\` on $(nproc) cores ($(clang++ --version | head -1)): each target"
    echo "for $seconds s from a corpus seeded with the repository's files of its kind; findings are"
    echo "inputs that crashed, hung (over 10 s), leaked or used over 2 GB."
    echo
    echo "$table"
  } > "$file"
  echo "recorded in ${file#"$root"/}"
fi
