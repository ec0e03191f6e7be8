#!/usr/bin/env bash
# Builds the .dstrat front-end fuzzer with clang (libFuzzer, ASan, UBSan) and
# runs it, seeded with the examples, the stdlib and the malformed corpus.
# Usage: scripts/fuzz-frontend.sh [SECONDS]   (default 180)
# Crashers land in build-fuzz/crashers/; keep each as a golden test under
# tests/golden/lang/bad/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-180}"
out="$root/build-fuzz"
mkdir -p "$out/grammar" "$out/corpus" "$out/crashers"
# clang rejects misc/InterpreterDataReader.h (unused here): use a copy of the
# runtime headers without it.
rm -rf "$out/antlr4-runtime" && cp -r /usr/include/antlr4-runtime "$out/antlr4-runtime"
sed -i '/InterpreterDataReader.h/d' "$out/antlr4-runtime/antlr4-runtime.h"
antlr4 -Dlanguage=Cpp -no-listener -no-visitor -package dstc::grammar -o "$out/grammar" "$root/grammar/Dstrat.g4"
flags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
cxx=(clang++ -std=c++20 "${flags[@]}" -I"$root" -isystem "$out/grammar" -isystem "$out/antlr4-runtime"
     -DDSTC_STDLIB_DIR="\"$root/stdlib\"")
objs=()
for src in "$out"/grammar/DstratLexer.cpp "$out"/grammar/DstratParser.cpp; do
  obj="$out/$(basename "$src" .cpp).o"
  [ "$obj" -nt "$src" ] || clang++ -std=c++17 "${flags[@]}" -w -isystem "$out/antlr4-runtime" -c "$src" -o "$obj"
  objs+=("$obj")
done
for src in "$root"/compiler/frontend/*.cpp "$root"/ir/source/*.cpp "$root"/tests/fuzz/frontend_fuzz.cpp; do
  obj="$out/$(basename "$(dirname "$src")")_$(basename "$src" .cpp).o"
  "${cxx[@]}" -c "$src" -o "$obj"
  objs+=("$obj")
done
clang++ "${flags[@]}" "${objs[@]}" -lantlr4-runtime -lfmt -o "$out/frontend_fuzz"
find "$root/examples" "$root/stdlib" "$root/tests/golden/lang" -name '*.dstrat' -exec cp {} "$out/corpus/" \;
cd "$out"
ASAN_OPTIONS=detect_leaks=1 ./frontend_fuzz -max_total_time="$seconds" -max_len=4096 -timeout=10 \
  -artifact_prefix="$out/crashers/" "$out/corpus"
