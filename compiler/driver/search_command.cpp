// dstc search FILE: enumerates a search space, compiles and simulates every
// configuration on all cores, and ranks them by throughput (a table; CSV,
// JSON and an SVG plot on request).
#include <chrono>
#include <fstream>
#include <functional>
#include <ostream>

#include <fmt/format.h>

#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/driver/human_units.h"
#include "compiler/driver/output_file.h"
#include "compiler/driver/progress_bar.h"
#include "compiler/frontend/frontend.h"
#include "compiler/search/export.h"
#include "compiler/search/plot.h"
#include "compiler/search/ranking.h"
#include "compiler/search/runner.h"
#include "compiler/search/table.h"
#include "htae/profile_database.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc {
namespace {

struct SearchOptions {
  std::string file;
  std::string search;
  std::string profile;
  std::vector<std::string> defines;
  size_t top = 20;
  int jobs = 0;
  std::string csv;
  std::string json;
  std::string plot;
  bool simulate_all = false;
};

// The search to run: the one named, or the file's only one.
const frontend::SearchSpace* pick_search(const frontend::FrontendResult& front, const SearchOptions& o,
                                         DiagnosticEngine& diags) {
  if (!o.search.empty()) {
    if (const frontend::SearchSpace* s = front.find_search(o.search)) return s;
  } else if (front.searches.size() == 1) {
    return &front.searches.front();
  }
  std::string names;
  for (const frontend::SearchSpace& s : front.searches) names += (names.empty() ? "" : ", ") + s.decl->name;
  std::string message = !o.search.empty()        ? fmt::format("'{}' declares no search '{}'", o.file, o.search)
                        : front.searches.empty() ? fmt::format("'{}' declares no search to run", o.file)
                                                 : fmt::format("'{}' declares {} searches; name one with --search",
                                                               o.file, front.searches.size());
  diags.error(diag::kUnknownSearch, {}, message)
      .note(names.empty() ? "a search is declared with `search NAME for MODEL { vary ... try Strategy(...) }`"
                          : "it declares: " + names);
  return nullptr;
}

// Writes one output file ("-": the command's output); false when it cannot.
bool write_output(CommandContext& ctx, const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (path.empty()) return true;
  if (path == "-") {
    write(ctx.out);
    return true;
  }
  std::string failure = write_file_atomically(path, write);
  if (!failure.empty()) {
    ctx.err << fmt::format("dstc search: error: cannot write '{}': {}\n", path, failure);
    return false;
  }
  return true;
}

int run_search_command(CommandContext& ctx, const SearchOptions& o) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  auto finish = [&](int code) {
    diags.render(ctx.err, ctx.color);
    return code;
  };
  std::unique_ptr<frontend::FrontendResult> front = frontend::check_files({o.file}, o.defines, sources, diags);
  if (diags.has_errors()) return finish(kExitInputErrors);
  const frontend::SearchSpace* space = pick_search(*front, o, diags);
  if (!space) return finish(kExitInputErrors);

  std::optional<htae::ProfileDatabase> profile;
  if (!o.profile.empty()) {
    profile = htae::ProfileDatabase::load(sources, diags, o.profile);
    if (!profile) return finish(kExitInputErrors);
  }
  search::SearchRunOptions run;
  run.jobs = o.jobs;
  run.profile = profile ? &*profile : nullptr;
  run.prune_by_memory_bound = !o.simulate_all;
  std::optional<ProgressBar> bar;
  const auto started = std::chrono::steady_clock::now();
  if (ctx.out_is_terminal) {
    bar.emplace(ctx.out);
    run.progress = [&](size_t done, size_t total) {
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
      std::string eta = rate > 0 ? "ETA " + human_duration(static_cast<double>(total - done) / rate) : "ETA -";
      bar->draw(total ? static_cast<double>(done) / static_cast<double>(total) : 1,
                fmt::format("{}/{} configurations  {:.0f}/s  {}", done, total, rate, eta));
    };
  }
  std::optional<search::SearchResult> result = search::run_search(*front, *space, sources, diags, run);
  if (bar) bar->clear();
  if (!result) return finish(kExitInputErrors);
  search::rank_search(*result);

  if (profile) ctx.out << fmt::format("op costs measured on {} (--profile)\n", profile->gpu);
  search::print_search_table(ctx.out, *result, o.top);
  if (ctx.out_is_terminal) {
    ctx.out << fmt::format("\n{} configurations in {:.2f} s on {} thread{} ({:.0f} configurations/s)\n",
                           result->configs.size(), result->elapsed_s, result->jobs, result->jobs == 1 ? "" : "s",
                           static_cast<double>(result->configs.size()) / std::max(result->elapsed_s, 1e-9));
  }
  bool written = write_output(ctx, o.csv, [&](std::ostream& out) { search::write_search_csv(out, *result); }) &&
                 write_output(ctx, o.json, [&](std::ostream& out) { search::write_search_json(out, *result); }) &&
                 write_output(ctx, o.plot, [&](std::ostream& out) { search::write_search_svg(out, *result); });
  if (!written) return finish(kExitInputErrors);
  if (result->count(search::ConfigStatus::internal_error) > 0) return finish(kExitInternal);
  return finish(kExitSuccess);
}

}  // namespace

Command add_search_command(CLI::App& root) {
  auto o = std::make_shared<SearchOptions>();
  CLI::App* sub = root.add_subcommand("search", "Rank the strategies of a search space by simulated throughput");
  sub->add_option("file", o->file, "The .dstrat file declaring the search")->required();
  sub->add_option("--search", o->search, "The search to run (default: the file's only one)");
  sub->add_option("--profile", o->profile,
                  "Measured op and collective times (dstc calibrate) for every simulation, e.g. profiles/h100-sxm.toml")
      ->transform(found_in_stdlib());
  sub->add_option("-D", o->defines, "Set a model or strategy parameter: -D name=value")->allow_extra_args(false);
  sub->add_option("--top", o->top, "How many of the fastest configurations the table shows (default 20)")
      ->check(CLI::PositiveNumber);
  sub->add_option("-j,--jobs", o->jobs, "Threads compiling and simulating (default: one per core)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--csv", o->csv, "Write every configuration's figures as CSV to this file ('-': stdout)")
      ->check(non_empty_path());
  sub->add_option("--json", o->json, "Write the summary and every configuration as JSON to this file ('-': stdout)")
      ->check(non_empty_path());
  sub->add_option("--plot", o->plot, "Write an SVG of peak memory against throughput to this file ('-': stdout)")
      ->check(non_empty_path());
  sub->add_flag("--simulate-all", o->simulate_all,
                "Simulate every configuration, also those a memory lower bound already shows out of memory");
  return {sub, [o](CommandContext& ctx) { return run_search_command(ctx, *o); }};
}

}  // namespace dstc
