#include "compiler/search/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "compiler/compile_strategy.h"
#include "compiler/logical/build_logical_graph.h"
#include "compiler/pipeline/load_strategy.h"
#include "compiler/search/memory_probe.h"
#include "compiler/search/parallelism.h"
#include "htae/simulator.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc::search {
namespace {

// The first error, on one line: "file:line:col: message [kind]".
std::string first_error(const DiagnosticEngine& diags) {
  for (const Diagnostic& d : diags.diagnostics()) {
    if (d.severity != Severity::Error) continue;
    std::string where = diags.location(d.range);
    return fmt::format("{}{}{} [{}]", where, where.empty() ? "" : ": ", d.message, d.kind.name);
  }
  return {};
}

std::string point_label(const std::vector<std::pair<std::string, std::string>>& point) {
  std::string label;
  for (const auto& [name, value] : point) label += fmt::format("{}{}={}", label.empty() ? "" : " ", name, value);
  return label;
}

// Loaded clusters by (file, node count): a search usually names one.
class ClusterCache {
 public:
  // nullptr after reporting to `diags` when the file is missing or invalid;
  // a profile for another GPU is warned about once per cluster.
  const htae::ClusterSpec* get(const frontend::ClusterReference& ref, SourceManager& sources, DiagnosticEngine& diags,
                               const htae::ProfileDatabase* profile) {
    auto key = std::make_pair(ref.resolved, ref.nodes);
    if (auto it = clusters_.find(key); it != clusters_.end()) return it->second ? &*it->second : nullptr;
    std::optional<htae::ClusterSpec>& slot = clusters_[key];
    if (ref.resolved.empty()) {
      frontend::report_missing_cluster(ref, diags);
      return nullptr;
    }
    htae::ClusterOverrides overrides;
    overrides.nodes = ref.nodes;
    slot = htae::load_cluster(sources, diags, ref.resolved, overrides);
    if (slot && profile) htae::warn_if_profile_is_for_another_gpu(*profile, slot->gpu, diags);
    return slot ? &*slot : nullptr;
  }

 private:
  std::map<std::pair<std::string, std::optional<int64_t>>, std::optional<htae::ClusterSpec>> clusters_;
};

// Compiles and simulates one configuration into `out`.
void compile_and_simulate(const frontend::Strategy& strategy, const htae::ClusterSpec& cluster, SourceManager& sources,
                          const SearchRunOptions& run, ConfigResult& out) {
  bool prune_by_memory_bound = run.prune_by_memory_bound;
  DiagnosticEngine diags(sources);
  auto fail = [&] {
    out.status = ConfigStatus::invalid;
    out.reason = first_error(diags);
    if (out.reason.empty()) out.reason = "the compiler rejected it without a diagnostic";
  };
  auto out_of_memory_by_bound = [&](const htae::MemoryLowerBound& bound) {
    out.status = ConfigStatus::out_of_memory;
    out.memory_bound_only = true;
    out.peak_memory_bytes = bound.bytes;
    out.memory_capacity_bytes = cluster.gpu.memory_bytes;
  };
  try {
    // The configuration is checked whole first, so an invalid one is
    // reported invalid even where its probe would not fit.
    std::optional<compiler::LogicalProgram> logical = compiler::build_logical_program(strategy, diags);
    if (!logical) return fail();
    std::optional<compiler::PlannedStrategy> planned = compiler::plan_strategy(*logical, sources, diags);
    if (!planned) return fail();
    std::optional<int32_t> fewer;
    if (prune_by_memory_bound) fewer = fewest_micro_batches(planned->resolved);
    if (fewer) {
      if (auto bound = memory_bound_exceeding(*logical, *planned, *fewer, cluster, sources)) {
        return out_of_memory_by_bound(*bound);
      }
    }
    compiler::CompiledStrategy compiled = compiler::lower_planned(std::move(*planned), sources);
    // Without fewer micro-batches to probe, the configuration is its own probe.
    if (prune_by_memory_bound && !fewer) {
      if (auto bound =
              memory_bound_exceeding(compiled.module, compiled.resolved, logical->spec.pipeline.axis, cluster)) {
        return out_of_memory_by_bound(*bound);
      }
    }
    htae::SimOptions options = simulation_options(*logical);
    options.profile = run.profile;
    std::optional<htae::SimReport> report = htae::simulate(compiled.module, cluster, options, diags);
    if (!report) return fail();
    out.status = report->oom ? ConfigStatus::out_of_memory : ConfigStatus::ranked;
    out.step_time_s = report->step_time_s;
    out.samples_per_s = report->samples_per_s.value_or(report->step_time_s > 0 ? 1 / report->step_time_s : 0);
    out.tokens_per_s = report->tokens_per_s;
    out.tflops_per_gpu = report->tflops_per_gpu;
    out.mfu = report->mfu;
    if (!report->peak_memory_bytes.empty()) {
      out.peak_memory_bytes = *std::max_element(report->peak_memory_bytes.begin(), report->peak_memory_bytes.end());
    }
    out.memory_capacity_bytes = report->memory_capacity_bytes;
    out.num_ops = report->num_ops;
  } catch (const std::exception& e) {
    out.status = ConfigStatus::internal_error;
    out.reason = e.what();
  }
}

// Copies the files `to` lacks from `from`, under the same ids, so that a
// worker's diagnostics locate what the front end parsed and a worker may
// load more (a schedule table) without touching the shared manager.
void copy_new_sources(const SourceManager& from, SourceManager& to) {
  for (FileId id = static_cast<FileId>(to.file_count()) + 1; id <= from.file_count(); ++id) {
    to.add(from.file(id).path, from.file(id).text);
  }
}

// What the workers share. Elaboration uses the front end's model cache and
// the shared source manager, so one worker at a time elaborates (under
// `mutex`); compiling and simulating, the bulk of the work, run in parallel.
class SearchWork {
 public:
  // Cluster errors go to `diags`, which the caller leaves alone until the
  // workers are done.
  SearchWork(frontend::FrontendResult& front, const frontend::SearchSpace& space,
             const std::vector<std::vector<frontend::Value>>& points, SourceManager& sources, DiagnosticEngine& diags,
             const SearchRunOptions& run, SearchResult& result)
      : front_(front), space_(space), points_(points), sources_(sources), diags_(diags), run_(run), result_(result) {}

  void work() {
    SourceManager replica;
    for (;;) {
      std::optional<frontend::Strategy> strategy;
      const htae::ClusterSpec* cluster = nullptr;
      size_t k = 0;
      {
        std::lock_guard lock(mutex_);
        if (next_ == result_.configs.size() || cluster_failed_) return;
        k = next_++;
        strategy = elaborate(result_.configs[k], cluster);
        copy_new_sources(sources_, replica);
      }
      if (strategy) compile_and_simulate(*strategy, *cluster, replica, run_, result_.configs[k]);
      ++done_;
    }
  }

  size_t done() const { return done_; }
  // A cluster that cannot be loaded stops the search.
  bool cluster_failed() const { return cluster_failed_; }

 private:
  // The strategy of configuration c, checked against its cluster; nullopt
  // when it is invalid (recorded in c) or its cluster cannot be loaded.
  std::optional<frontend::Strategy> elaborate(ConfigResult& c, const htae::ClusterSpec*& cluster) {
    size_t t = c.index % space_.tries.size();
    DiagnosticEngine diags(sources_);
    std::optional<frontend::Strategy> strategy = elaborate_search_point(
        *front_.program, space_, points_[c.index / space_.tries.size()], t, front_.model_cache, diags);
    if (!strategy || diags.has_errors()) {
      c.status = ConfigStatus::invalid;
      c.reason = first_error(diags);
      // The model cache reports a model's errors once, for the first point that needed it.
      if (c.reason.empty()) c.reason = "the model has errors with these parameters (see the first invalid point)";
      return std::nullopt;
    }
    cluster = clusters_.get(strategy->cluster, sources_, diags_, run_.profile);
    if (!cluster) {
      cluster_failed_ = true;
      return std::nullopt;
    }
    if (result_.cluster.empty()) result_.cluster = cluster->name;
    frontend::CheckedStrategy checked{nullptr, std::move(*strategy)};
    frontend::check_against_cluster(checked, {cluster->num_devices(), cluster->gpu.memory_bytes}, diags);
    c.devices = checked.strategy.devices();
    c.parallelism = parallelism_of(checked.strategy);
    if (diags.has_errors()) {
      c.status = ConfigStatus::invalid;
      c.reason = first_error(diags);
      return std::nullopt;
    }
    return std::move(checked.strategy);
  }

  frontend::FrontendResult& front_;
  const frontend::SearchSpace& space_;
  const std::vector<std::vector<frontend::Value>>& points_;
  SourceManager& sources_;
  DiagnosticEngine& diags_;
  const SearchRunOptions& run_;
  SearchResult& result_;
  std::mutex mutex_;
  size_t next_ = 0;
  ClusterCache clusters_;
  bool cluster_failed_ = false;
  std::atomic<size_t> done_{0};
};

}  // namespace

std::optional<SearchResult> run_search(frontend::FrontendResult& front, const frontend::SearchSpace& space,
                                       SourceManager& sources, DiagnosticEngine& diags,
                                       const SearchRunOptions& options) {
  auto started = std::chrono::steady_clock::now();
  SearchResult result;
  result.search = space.decl->name;
  result.file = front.program->files[space.file]->path;
  result.grid_size = space.grid_size;
  result.jobs = options.jobs > 0 ? options.jobs : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  std::vector<std::vector<frontend::Value>> points;
  enumerate_search(space, diags, [&](const std::vector<frontend::Value>& p) {
    points.push_back(p);
    return true;
  });
  if (diags.has_errors()) return std::nullopt;
  for (const std::vector<frontend::Value>& p : points) {
    for (const frontend::SearchStmt* t : space.tries) {
      ConfigResult& c = result.configs.emplace_back();
      c.index = result.configs.size() - 1;
      for (size_t v = 0; v < space.vars.size(); ++v) c.point.emplace_back(space.vars[v].name, to_string(p[v]));
      c.strategy = t->name;
      c.label = point_label(c.point);
      if (space.tries.size() > 1) c.label = c.strategy + (c.label.empty() ? "" : " " + c.label);
    }
  }

  SearchWork work(front, space, points, sources, diags, options, result);
  size_t total = result.configs.size();
  result.jobs = static_cast<int>(std::min<size_t>(static_cast<size_t>(result.jobs), std::max<size_t>(total, 1)));
  std::mutex mutex;
  std::condition_variable finished;
  int workers_left = result.jobs;
  std::vector<std::thread> threads;
  for (int j = 0; j < result.jobs; ++j) {
    threads.emplace_back([&] {
      work.work();
      std::lock_guard lock(mutex);
      if (--workers_left == 0) finished.notify_one();
    });
  }
  {
    std::unique_lock lock(mutex);
    while (!finished.wait_for(lock, std::chrono::milliseconds(100), [&] { return workers_left == 0; })) {
      if (options.progress) options.progress(work.done(), total);
    }
  }
  for (std::thread& t : threads) t.join();
  if (work.cluster_failed()) return std::nullopt;
  if (options.progress) options.progress(total, total);
  result.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace dstc::search
