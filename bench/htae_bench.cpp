// HTAE: flow-engine events per second under heavy link sharing, and routing
// on a 4096-GPU cluster.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "htae/cluster_spec.h"
#include "htae/flow_engine.h"
#include "htae/topology.h"

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

}  // namespace
