// The .dstrat front end on a generated 20,000-line file: parse, resolve,
// elaborate the model (thousands of layer instances) and a strategy.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/frontend/frontend.h"
#include "compiler/frontend/parser.h"

namespace {

// `layers` layers of 6 lines, a model instantiating each once, a strategy.
std::string generated_program(int layers) {
  std::string text = "// generated\n";
  for (int i = 0; i < layers; ++i) {
    text += "layer L" + std::to_string(i) + "(n: int) {\n  input x[..., h: n]\n  param w[o: n, h: n]\n";
    text += "  y[..., o] = matmul(x[..., h], w[o, h])\n  z = relu(y)\n  output z\n}\n";
  }
  text += "model Big(batch = 64, hidden = 256) {\n  input a0[b: batch, h: hidden]\n";
  for (int i = 0; i < layers; ++i) {
    text += "  a" + std::to_string(i + 1) + " = L" + std::to_string(i) + "(hidden)(a" + std::to_string(i) + ")\n";
  }
  text += "  output a" + std::to_string(layers) + "\n}\n";
  text += "strategy DP for Big {\n  mesh [dp: 8, tp: 2]\n  default compute [dp: S(b)]\n  * compute [dp: S(b)]\n";
  text += "  a1 compute [dp: S(b), tp: S(o)]\n}\n";
  return text;
}

std::string write_program(int layers) {
  std::string path = (std::filesystem::temp_directory_path() / "dstc_frontend_bench.dstrat").string();
  std::ofstream(path) << generated_program(layers);
  return path;
}

constexpr int kLayers = 2850;  // about 20,000 lines

void BM_FrontendCheck20kLines(benchmark::State& state) {
  std::string path = write_program(kLayers);
  for (auto _ : state) {
    dstc::SourceManager sources;
    dstc::DiagnosticEngine diags(sources);
    auto result = dstc::frontend::check_files({path}, {}, sources, diags);
    if (diags.has_errors() || result->strategies.size() != 1) state.SkipWithError("the generated program has errors");
    benchmark::DoNotOptimize(result);
  }
  std::string text = generated_program(kLayers);
  state.counters["lines"] = static_cast<double>(std::count(text.begin(), text.end(), '\n'));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  std::remove(path.c_str());
}
BENCHMARK(BM_FrontendCheck20kLines)->Unit(benchmark::kMillisecond);

void BM_FrontendParse20kLines(benchmark::State& state) {
  std::string text = generated_program(kLayers);
  for (auto _ : state) {
    dstc::SourceManager sources;
    dstc::DiagnosticEngine diags(sources);
    auto ast = dstc::frontend::parse_file(sources.add("big.dstrat", text), diags);
    if (!ast) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(ast);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_FrontendParse20kLines)->Unit(benchmark::kMillisecond);

}  // namespace
