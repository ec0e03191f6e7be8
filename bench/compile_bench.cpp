// Compile time against op count (issue targets: GPT-2 on 32 GPUs compiled,
// and compiled and simulated, in under 50 ms), and the 1024-GPU GPT-3 175B
// 3-D strategy. Each iteration runs the front end, the logical graph builder and the
// compiler from the .dstrat file, as `dstc compile` does.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "compiler/compile_strategy.h"
#include "compiler/frontend/frontend.h"
#include "compiler/logical/build_logical_graph.h"
#include "htae/cluster_spec.h"
#include "htae/simulator.h"

namespace {

struct Case {
  std::string file;
  std::vector<std::string> defines;
};

const Case kGpt2On32{"examples/gpt2_3d_1f1b.dstrat", {"dp=4"}};  // pp 2 × dp 4 × tp 4
const Case kGpt3On1024{"examples/gpt3_175b_megatron.dstrat", {}};

std::optional<dstc::compiler::CompiledStrategy> compile(const Case& c, int64_t& ops, int64_t& devices) {
  dstc::SourceManager sources;
  dstc::DiagnosticEngine diags(sources);
  auto front = dstc::frontend::check_files({c.file}, c.defines, sources, diags);
  if (diags.has_errors() || front->strategies.empty()) return std::nullopt;
  auto logical = dstc::compiler::build_logical_program(front->strategies.front().strategy, diags);
  if (!logical) return std::nullopt;
  auto compiled = dstc::compiler::compile_strategy(*logical, sources, diags);
  if (compiled) {
    ops = static_cast<int64_t>(compiled->module.functions.front().ops.size());
    devices = compiled->module.mesh().size();
  }
  return compiled;
}

void run_compile(benchmark::State& state, const Case& c) {
  std::filesystem::current_path(DSTC_SOURCE_DIR);
  int64_t ops = 0, devices = 0;
  for (auto _ : state) {
    auto compiled = compile(c, ops, devices);
    if (!compiled) state.SkipWithError("the strategy does not compile");
    benchmark::DoNotOptimize(compiled);
  }
  state.counters["ir_ops"] = static_cast<double>(ops);
  state.counters["devices"] = static_cast<double>(devices);
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CompileGpt2On32Gpus(benchmark::State& state) { run_compile(state, kGpt2On32); }
BENCHMARK(BM_CompileGpt2On32Gpus)->Unit(benchmark::kMillisecond);

void BM_CompileGpt3On1024Gpus(benchmark::State& state) { run_compile(state, kGpt3On1024); }
BENCHMARK(BM_CompileGpt3On1024Gpus)->Unit(benchmark::kMillisecond)->Iterations(1);

// Compile, then simulate one step on the strategy's cluster file.
void run_compile_and_simulate(benchmark::State& state, const Case& c, const char* cluster_file, int64_t nodes) {
  std::filesystem::current_path(DSTC_SOURCE_DIR);
  dstc::SourceManager sources;
  dstc::DiagnosticEngine diags(sources);
  dstc::htae::ClusterOverrides overrides;
  overrides.nodes = nodes;
  auto cluster = dstc::htae::load_cluster(sources, diags, cluster_file, overrides);
  int64_t ops = 0, devices = 0;
  for (auto _ : state) {
    auto compiled = compile(c, ops, devices);
    if (!compiled || !cluster) {
      state.SkipWithError("the strategy does not compile");
      break;
    }
    dstc::htae::SimOptions options;
    auto report = dstc::htae::simulate(compiled->module, *cluster, options, diags);
    benchmark::DoNotOptimize(report);
  }
  state.counters["ir_ops"] = static_cast<double>(ops);
  state.counters["devices"] = static_cast<double>(devices);
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CompileAndSimulateGpt2On32Gpus(benchmark::State& state) {
  run_compile_and_simulate(state, kGpt2On32, "stdlib/clusters/v100-nvlink-4x8.toml", 4);
}
BENCHMARK(BM_CompileAndSimulateGpt2On32Gpus)->Unit(benchmark::kMillisecond);

// Issue target: a 1024-GPU GPT-3 strategy compiled and simulated in under 2 s.
void BM_CompileAndSimulateGpt3On1024Gpus(benchmark::State& state) {
  run_compile_and_simulate(state, kGpt3On1024, "stdlib/clusters/dgx-a100.toml", 128);
}
BENCHMARK(BM_CompileAndSimulateGpt3On1024Gpus)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
