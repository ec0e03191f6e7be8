// HTAE: flow-engine events per second under heavy link sharing, routing on
// a 4096-GPU cluster, and whole-step simulation of synthetic GPT-like
// modules from 8 to 4096 GPUs (simulated ops per second).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "htae/cluster_spec.h"
#include "htae/flow_engine.h"
#include "htae/simulator.h"
#include "htae/topology.h"
#include "tests/unit/htae/synthetic_gpt.h"

namespace {

using namespace dstc::htae;

ClusterSpec dgx_a100(int64_t nodes) {
  dstc::SourceManager sources;
  dstc::DiagnosticEngine diags(sources);
  auto spec =
      load_cluster(sources, diags, std::string(DSTC_SOURCE_DIR) + "/stdlib/clusters/dgx-a100.toml", {.nodes = nodes});
  if (!spec) throw std::runtime_error("cannot load dgx-a100.toml");
  return *spec;
}

// A fixed-seed generator so every run replays the same traffic.
struct Lcg {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  uint64_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  }
};

// 128 GPUs (16 DGX A100), `concurrent` flows in flight between random GPU
// pairs (a quarter across nodes), 1-64 MiB each; every delivered flow is
// replaced by a new one. Items are flow events: one start plus one finish.
void BM_HtaeFlowEngineEvents(benchmark::State& state) {
  Topology topo(dgx_a100(16));
  FlowEngine engine(topo);
  auto concurrent = static_cast<size_t>(state.range(0));
  Lcg rng;
  std::vector<LinkId> route;
  auto start_one = [&](double now) {
    int64_t src = static_cast<int64_t>(rng.next() % 128);
    int64_t dst = rng.next() % 4 == 0 ? static_cast<int64_t>(rng.next() % 128) : (src / 8) * 8 + rng.next() % 8;
    route.clear();
    topo.route(src, dst, route);
    engine.start_flow(route, static_cast<double>((1 + rng.next() % 64) << 20), now, topo.route_latency(src, dst));
  };
  for (size_t i = 0; i < concurrent; ++i) start_one(0);
  std::vector<DeliveredFlow> delivered;
  int64_t events = 0;
  for (auto _ : state) {
    delivered.clear();
    engine.advance_to(engine.next_event_time(), delivered);
    for (size_t i = 0; i < delivered.size(); ++i) start_one(engine.now());
    events += 2 * static_cast<int64_t>(delivered.size());
  }
  state.SetItemsProcessed(events);
  state.counters["recomputations"] = static_cast<double>(engine.recomputations());
}
BENCHMARK(BM_HtaeFlowEngineEvents)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

// Building the topology of 512 DGX A100 (4096 GPUs): links and the per-node
// routes (Dijkstra over one node).
void BM_HtaeTopology4096(benchmark::State& state) {
  ClusterSpec spec = dgx_a100(512);
  for (auto _ : state) {
    Topology topo(spec);
    benchmark::DoNotOptimize(topo.num_links());
  }
}
BENCHMARK(BM_HtaeTopology4096)->Unit(benchmark::kMicrosecond);

// Routes between random pairs of the 4096 GPUs.
void BM_HtaeRoute4096(benchmark::State& state) {
  Topology topo(dgx_a100(512));
  Lcg rng;
  std::vector<LinkId> route;
  for (auto _ : state) {
    route.clear();
    topo.route(static_cast<int64_t>(rng.next() % 4096), static_cast<int64_t>(rng.next() % 4096), route);
    benchmark::DoNotOptimize(route.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HtaeRoute4096);

// One training step of a synthetic GPT (tests/unit/htae/synthetic_gpt.h)
// on DGX A100 nodes: args pp, dp, tp, layers, micro-batches, symmetry. Items
// are op executions summed over devices (an op on a 128-GPU stage counts
// 128); the counters give IR ops and device ops simulated per second.
void BM_HtaeSimulateGpt(benchmark::State& state) {
  dstc::htae::testing::GptShape shape;
  shape.pp = static_cast<int>(state.range(0));
  shape.dp = static_cast<int>(state.range(1));
  shape.tp = static_cast<int>(state.range(2));
  shape.layers = static_cast<int>(state.range(3));
  shape.micro = static_cast<int>(state.range(4));
  dstc::ir::Module module = dstc::htae::testing::synthetic_gpt(shape);
  int64_t gpus = int64_t{shape.pp} * shape.dp * shape.tp;
  ClusterSpec cluster = dgx_a100((gpus + 7) / 8);
  SimOptions options;
  options.symmetry = state.range(5) != 0;
  dstc::SourceManager sources;
  dstc::DiagnosticEngine diags(sources);
  SimReport last;
  for (auto _ : state) {
    std::optional<SimReport> report = simulate(module, cluster, options, diags);
    if (!report) throw std::runtime_error("simulation failed");
    last = std::move(*report);
  }
  auto iterations = static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() * last.num_device_ops);
  state.counters["gpus"] = static_cast<double>(gpus);
  state.counters["ir_ops"] = static_cast<double>(last.num_ops);
  state.counters["device_ops"] = static_cast<double>(last.num_device_ops);
  state.counters["classes"] = static_cast<double>(last.num_classes);
  state.counters["flows"] = static_cast<double>(last.num_flows);
  state.counters["ir_ops_per_s"] =
      benchmark::Counter(static_cast<double>(last.num_ops) * iterations, benchmark::Counter::kIsRate);
  state.counters["step_ms"] = last.step_time_s * 1e3;
}
BENCHMARK(BM_HtaeSimulateGpt)
    ->ArgNames({"pp", "dp", "tp", "layers", "micro", "sym"})
    ->Args({2, 2, 2, 8, 8, 1})
    ->Args({4, 2, 4, 16, 8, 1})
    ->Args({4, 4, 8, 32, 16, 1})
    ->Args({4, 4, 8, 32, 16, 0})
    ->Args({8, 16, 8, 96, 16, 1})
    ->Args({16, 32, 8, 96, 32, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
