// dstc compile FILE: lowers a strategy to verified explicit-schedule IR and
// writes it (--emit ir|ranks|dot|tree), explains every config (--explain),
// or predicts its performance on the cluster (--simulate).
#include <fstream>
#include <future>
#include <ostream>
#include <sstream>

#include <fmt/format.h>

#include "compiler/compile_strategy.h"
#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/driver/output_file.h"
#include "compiler/explain/strategy_tree_printer.h"
#include "compiler/logical/build_logical_graph.h"
#include "compiler/pipeline/load_strategy.h"
#include "htae/report.h"
#include "htae/simulator.h"
#include "ir/dot.h"
#include "ir/printer.h"
#include "ir/projection.h"
#include "ir/verifier.h"

namespace dstc {
namespace {

struct CompileOptions {
  StrategyRequest request;
  std::string emit;
  int32_t rank = -1;
  bool explain = false;
  std::string output;
  bool simulate = false;
  std::string format = "text";
  std::string trace;
  std::string profile;
  std::string executor = "htae";
  bool no_bandwidth_sharing = false;
  bool no_overlap = false;
};

std::optional<htae::SimReport> simulate(const CompileOptions& o, const LoadedStrategy& loaded,
                                        const compiler::LogicalProgram& logical,
                                        const compiler::CompiledStrategy& compiled,
                                        const std::optional<htae::ProfileDatabase>& profile, DiagnosticEngine& diags) {
  htae::SimOptions options = simulation_options(logical);
  options.profile = profile ? &*profile : nullptr;
  options.bandwidth_sharing = !o.no_bandwidth_sharing;
  options.overlap = !o.no_overlap;
  options.executor = *htae::parse_executor(o.executor);
  options.record_trace = !o.trace.empty();
  return htae::simulate(compiled.module, loaded.cluster, options, diags);
}

int print_simulation(CommandContext& ctx, const CompileOptions& o, const compiler::CompiledStrategy& compiled,
                     const htae::SimReport& report) {
  if (o.format == "json") {
    htae::print_report_json(ctx.out, report);
  } else {
    htae::print_report_text(ctx.out, report);
  }
  if (!o.trace.empty()) {
    std::string failure = write_file_atomically(o.trace, [&](std::ostream& trace) {
      htae::write_chrome_trace(trace, compiled.module, compiled.module.functions.front(), report);
    });
    if (!failure.empty()) {
      ctx.err << fmt::format("dstc compile: error: cannot write the trace to '{}': {}\n", o.trace, failure);
      return kExitInputErrors;
    }
  }
  return kExitSuccess;
}

int run_compile(CommandContext& ctx, const CompileOptions& o) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  auto finish = [&](int code) {
    diags.render(ctx.err, ctx.color);
    return code;
  };
  std::optional<LoadedStrategy> loaded = load_strategy(o.request, sources, diags);
  if (!loaded) return finish(kExitInputErrors);
  std::optional<compiler::LogicalProgram> logical = compiler::build_logical_program(loaded->strategy->strategy, diags);
  if (!logical) return finish(kExitInputErrors);
  std::optional<compiler::CompiledStrategy> compiled = compiler::compile_strategy(*logical, sources, diags);
  if (!compiled) return finish(kExitInputErrors);
  // Loaded before verification starts: loading adds to the sources both read.
  std::optional<htae::ProfileDatabase> profile;
  if (o.simulate && !o.profile.empty()) {
    profile = htae::ProfileDatabase::load(sources, diags, o.profile);
    if (!profile) return finish(kExitInputErrors);
    htae::warn_if_profile_is_for_another_gpu(*profile, loaded->cluster.gpu, diags);
  }
  // Verifying the compiler's output guards against compiler bugs. With
  // --simulate it runs on a second thread beside the simulation (both only
  // read the module); a module that fails gets no prediction.
  DiagnosticEngine verify_diags(sources);
  std::future<bool> verified = std::async(o.simulate ? std::launch::async : std::launch::deferred,
                                          [&] { return ir::verify_module(compiled->module, verify_diags); });
  std::optional<htae::SimReport> report;
  if (o.simulate) report = simulate(o, *loaded, *logical, *compiled, profile, diags);
  if (!verified.get()) {
    ctx.err << "dstc: internal error: the compiler produced IR that does not verify:\n";
    verify_diags.render(ctx.err, ctx.color);
    return finish(kExitInternal);
  }

  std::ostringstream text;
  if (o.explain) text << compiler::print_strategy_tree(logical->graph, logical->spec, *compiled, true);
  if (o.emit == "tree") text << compiler::print_strategy_tree(logical->graph, logical->spec, *compiled, false);
  if (o.emit == "ir") text << ir::print_module(compiled->module);
  if (o.emit == "dot") text << ir::export_dot(compiled->module);
  if (o.emit == "ranks") {
    const ir::Function& f = compiled->module.functions.front();
    int32_t devices = compiled->module.mesh().size();
    if (o.rank >= devices) {
      ctx.err << fmt::format("dstc compile: error: --rank {} is outside the mesh's {} devices\n", o.rank, devices);
      return finish(kExitUsage);
    }
    if (o.rank >= 0) {
      text << ir::print_rank_program(compiled->module, f, ir::project_rank(compiled->module, f, o.rank));
    } else {
      for (const ir::RankProgram& program : ir::project_ranks(compiled->module, f))
        text << ir::print_rank_program(compiled->module, f, program);
    }
  }
  if (!o.output.empty()) {
    std::string failure = write_file_atomically(o.output, [&](std::ostream& file) { file << text.str(); });
    if (!failure.empty()) {
      ctx.err << fmt::format("dstc compile: error: cannot write '{}': {}\n", o.output, failure);
      return finish(kExitInputErrors);
    }
  } else {
    ctx.out << text.str();
  }
  if (o.simulate) return finish(report ? print_simulation(ctx, o, *compiled, *report) : kExitInputErrors);
  if (o.emit.empty() && !o.explain) {
    const ir::Function& f = compiled->module.functions.front();
    ctx.out << fmt::format("{}: compiled to {} ops on {} devices ({} pipeline stage{}); verified\n",
                           loaded->strategy->strategy.name, f.ops.size(), compiled->module.mesh().size(),
                           compiled->resolved.num_stages, compiled->resolved.num_stages == 1 ? "" : "s");
  }
  return finish(kExitSuccess);
}

}  // namespace

Command add_compile_command(CLI::App& root) {
  auto o = std::make_shared<CompileOptions>();
  CLI::App* sub = root.add_subcommand("compile", "Compile a strategy to IR; --simulate predicts its performance");
  sub->add_option("file", o->request.file, "The .dstrat file")->required();
  sub->add_option("--strategy", o->request.strategy, "The strategy to compile (default: the file's only one)");
  sub->add_option("-D", o->request.defines, "Set a model or strategy parameter: -D name=value")
      ->allow_extra_args(false);
  sub->add_option("--emit", o->emit, "Write the IR, per-rank programs, a Graphviz graph or the strategy tree")
      ->transform(one_of({"ir", "ranks", "dot", "tree"}));
  sub->add_option("--rank", o->rank, "With --emit=ranks: only this device's program")->check(CLI::NonNegativeNumber);
  sub->add_flag("--explain", o->explain, "Print every node's final config and where it came from");
  sub->add_option("-o,--output", o->output, "Write the emitted text to this file")->check(non_empty_path());
  sub->add_flag("--simulate", o->simulate, "Predict step time, throughput and memory on the cluster");
  sub->add_option("--cluster", o->request.cluster, "Simulate on this cluster file instead of the strategy's")
      ->transform(found_in_stdlib());
  sub->add_option("--format", o->format, "Simulation report: text or json")->transform(one_of({"text", "json"}));
  sub->add_option("--trace", o->trace, "Write a Chrome trace (Perfetto) of the simulated step")
      ->check(non_empty_path());
  sub->add_option("--profile", o->profile,
                  "Measured op and collective times (dstc calibrate), e.g. profiles/h200-sxm.toml")
      ->transform(found_in_stdlib());
  sub->add_option("--executor", o->executor, "htae, or program-order (DistIR: one op at a time per device)")
      ->transform(one_of({"htae", "program-order"}));
  sub->add_flag("--no-bandwidth-sharing", o->no_bandwidth_sharing, "Give every transfer its route's full bandwidth");
  sub->add_flag("--no-overlap", o->no_overlap,
                "Do not slow computation while gradient collectives and all-to-alls hold SMs");
  return {sub, [o](CommandContext& ctx) { return run_compile(ctx, *o); }};
}

}  // namespace dstc
