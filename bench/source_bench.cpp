// Source handling: loading a large file and mapping offsets to line:column,
// which every diagnostic and every AST source range goes through.
#include <benchmark/benchmark.h>

#include <string>

#include "ir/source/source_manager.h"

namespace {

std::string generated_source(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) text += "  y" + std::to_string(i) + "[b, s, o] = matmul(x[b, s, h], w[o, h])\n";
  return text;
}

void BM_SourceManagerAdd(benchmark::State& state) {
  std::string text = generated_source(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    dstc::SourceManager sm;
    benchmark::DoNotOptimize(sm.add("f.dstrat", text));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_SourceManagerAdd)->Arg(20000);

void BM_LineColLookup(benchmark::State& state) {
  std::string text = generated_source(20000);
  dstc::SourceManager sm;
  dstc::FileId f = sm.add("f.dstrat", text);
  uint32_t offset = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(sm.line_col(f, offset));
    offset = (offset + 7919) % static_cast<uint32_t>(text.size());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LineColLookup);

}  // namespace
