// `dstc search` on the example grids: the whole search (check the file,
// elaborate, compile and simulate every configuration on 2 threads, rank),
// as configurations per second, with the mean IR op count per configuration
// and the time per op, so that the cost per configuration can be read
// against the op count. The second argument turns the memory lower bound's
// pruning on (1) or off (0, `--simulate-all`: the baseline it is measured
// against in the same run).
#include <benchmark/benchmark.h>

#include <string>

#include "compiler/frontend/frontend.h"
#include "compiler/search/ranking.h"
#include "compiler/search/runner.h"

namespace {

void run_grid(benchmark::State& state, const char* file, const char* search) {
  std::string path = std::string(DSTC_SOURCE_DIR) + "/" + file;
  size_t configs = 0, pruned = 0;
  double ops = 0;
  double simulated = 0;
  for (auto _ : state) {
    dstc::SourceManager sources;
    dstc::DiagnosticEngine diags(sources);
    auto front = dstc::frontend::check_files({path}, {}, sources, diags);
    const dstc::frontend::SearchSpace* space = front->find_search(search);
    if (diags.has_errors() || !space) {
      state.SkipWithError("the example does not check");
      return;
    }
    dstc::search::SearchRunOptions options;
    options.jobs = static_cast<int>(state.range(0));
    options.prune_by_memory_bound = state.range(1) != 0;
    std::optional<dstc::search::SearchResult> result =
        dstc::search::run_search(*front, *space, sources, diags, options);
    if (!result) {
      state.SkipWithError("the search cannot run");
      return;
    }
    dstc::search::rank_search(*result);
    configs = result->configs.size();
    pruned = result->count_memory_bound_only();
    ops = simulated = 0;
    for (const dstc::search::ConfigResult& c : result->configs) {
      if (!c.simulated()) continue;
      ops += static_cast<double>(c.num_ops);
      simulated += 1;
    }
  }
  state.counters["configurations"] = static_cast<double>(configs);
  state.counters["simulated"] = simulated;
  state.counters["pruned_by_memory_bound"] = static_cast<double>(pruned);
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(configs * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["mean_ops"] = simulated > 0 ? ops / simulated : 0;
  // Wall time per simulated op, over all threads: the cost against op count.
  state.counters["s_per_op"] = benchmark::Counter(ops * static_cast<double>(state.iterations()),
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_SearchMlp1B(benchmark::State& state) { run_grid(state, "examples/search_mlp_distir.dstrat", "MLP1B"); }
void BM_SearchMlp17B(benchmark::State& state) { run_grid(state, "examples/search_mlp_distir.dstrat", "MLP17B"); }
void BM_SearchMlp103B(benchmark::State& state) { run_grid(state, "examples/search_mlp_distir.dstrat", "MLP103B"); }
void BM_SearchGpt2Inference1_6B(benchmark::State& state) {
  run_grid(state, "examples/search_gpt2_inference.dstrat", "GPT2_1_6B");
}
void BM_SearchGpt2Inference13B(benchmark::State& state) {
  run_grid(state, "examples/search_gpt2_inference.dstrat", "GPT2_13B");
}
void BM_SearchGpt2Inference175B(benchmark::State& state) {
  run_grid(state, "examples/search_gpt2_inference.dstrat", "GPT2_175B");
}
void BM_SearchGpt3Training(benchmark::State& state) {
  run_grid(state, "examples/search_gpt3_training.dstrat", "GPT3Training");
}

// Arguments: threads (the machine the figures are recorded on has 2
// cores), and the memory bound's pruning on or off.
BENCHMARK(BM_SearchMlp1B)->Args({1, 1})->Args({2, 1})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SearchMlp17B)->Args({2, 1})->Args({2, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SearchMlp103B)->Args({2, 1})->Args({2, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SearchGpt2Inference1_6B)
    ->Args({2, 1})
    ->Args({2, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_SearchGpt2Inference13B)
    ->Args({2, 1})
    ->Args({2, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_SearchGpt2Inference175B)
    ->Args({2, 1})
    ->Args({2, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_SearchGpt3Training)->Args({2, 1})->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
