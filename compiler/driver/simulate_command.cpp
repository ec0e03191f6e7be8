// dstc simulate FILE.ir --cluster C.toml: predicts step time, throughput,
// memory and where time goes for an explicit-schedule IR module on a
// cluster (docs/simulator.md), as a table, JSON, and a Chrome trace.
#include <fstream>
#include <ostream>

#include <fmt/format.h>

#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/driver/output_file.h"
#include "htae/cluster_spec.h"
#include "htae/profile_database.h"
#include "htae/report.h"
#include "htae/simulator.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace dstc {

namespace {

struct SimulateOptions {
  std::string file;
  std::string cluster;
  int64_t nodes = 0;
  std::string format = "text";
  std::string trace;
  int64_t batch = 0;
  int64_t seq = 0;
  std::string profile;
  std::string function;
  std::string executor = "htae";
  bool no_bandwidth_sharing = false;
  bool no_overlap = false;
  bool no_symmetry = false;
};

int run_simulate(CommandContext& ctx, const SimulateOptions& opts, const CLI::App& sub) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<ir::Module> module = ir::parse_file(sources, opts.file, diags);
  bool ok = module && ir::verify_module(*module, diags);
  htae::ClusterOverrides overrides;
  if (sub.count("--nodes") > 0) overrides.nodes = opts.nodes;
  std::optional<htae::ClusterSpec> cluster = htae::load_cluster(sources, diags, opts.cluster, overrides);
  std::optional<htae::ProfileDatabase> profile;
  if (!opts.profile.empty()) profile = htae::ProfileDatabase::load(sources, diags, opts.profile);
  if (!ok || !cluster || (!opts.profile.empty() && !profile)) {
    diags.render(ctx.err, ctx.color);
    return kExitInputErrors;
  }
  if (profile) htae::warn_if_profile_is_for_another_gpu(*profile, cluster->gpu, diags);
  htae::SimOptions options;
  options.function = opts.function;
  if (sub.count("--batch") > 0) options.global_batch = opts.batch;
  if (sub.count("--seq") > 0) options.sequence_length = opts.seq;
  options.profile = profile ? &*profile : nullptr;
  options.bandwidth_sharing = !opts.no_bandwidth_sharing;
  options.overlap = !opts.no_overlap;
  options.executor = *htae::parse_executor(opts.executor);
  options.symmetry = !opts.no_symmetry;
  options.record_trace = !opts.trace.empty();
  std::optional<htae::SimReport> report = htae::simulate(*module, *cluster, options, diags);
  diags.render(ctx.err, ctx.color);
  if (!report) return kExitInputErrors;
  if (opts.format == "json") {
    htae::print_report_json(ctx.out, *report);
  } else {
    htae::print_report_text(ctx.out, *report);
  }
  if (!opts.trace.empty()) {
    const ir::Function* f = module->find_function(report->function);
    std::string failure = write_file_atomically(
        opts.trace, [&](std::ostream& trace) { htae::write_chrome_trace(trace, *module, *f, *report); });
    if (!failure.empty()) {
      ctx.err << fmt::format("dstc simulate: error: cannot write the trace to '{}': {}\n", opts.trace, failure);
      return kExitInputErrors;
    }
  }
  return kExitSuccess;
}

}  // namespace

Command add_simulate_command(CLI::App& root) {
  auto opts = std::make_shared<SimulateOptions>();
  CLI::App* sub =
      root.add_subcommand("simulate", "Predict step time, throughput and memory of an IR module on a cluster");
  sub->add_option("file", opts->file, "The IR module (text form, docs/ir.md)")->required();
  sub->add_option("--cluster", opts->cluster, "The cluster description (TOML), e.g. clusters/dgx-a100.toml")
      ->required()
      ->transform(found_in_stdlib());
  sub->add_option("--nodes", opts->nodes, "Override the cluster's number of nodes");
  sub->add_option("--format", opts->format, "Output: text or json")
      ->transform(one_of({"text", "json"}))
      ->capture_default_str();
  sub->add_option("--trace", opts->trace, "Write a Chrome trace (Perfetto) of the simulated step to this file")
      ->check(non_empty_path());
  sub->add_option("--batch", opts->batch, "Global batch (samples per step), for samples/s and tokens/s")
      ->check(CLI::PositiveNumber);
  sub->add_option("--seq", opts->seq, "Sequence length (tokens per sample), for tokens/s")->check(CLI::PositiveNumber);
  sub->add_option("--profile", opts->profile,
                  "A profile database (dstc calibrate) overriding the cost model, e.g. profiles/h200-sxm.toml")
      ->transform(found_in_stdlib());
  sub->add_option("--function", opts->function, "The function to simulate (default: train_step, else the first)");
  sub->add_option("--executor", opts->executor,
                  "htae: three concurrent streams per device; program-order: one op at a time (DistIR)")
      ->transform(one_of({"htae", "program-order"}))
      ->capture_default_str();
  sub->add_flag("--no-bandwidth-sharing", opts->no_bandwidth_sharing,
                "Ablation: every transfer gets its route's full bandwidth");
  sub->add_flag("--no-overlap", opts->no_overlap,
                "Ablation: compute is not slowed while gradient collectives and all-to-alls hold SMs");
  sub->add_flag("--no-symmetry", opts->no_symmetry, "Simulate every device, not one per class of identical devices");
  return {sub, [opts, sub](CommandContext& ctx) { return run_simulate(ctx, *opts, *sub); }};
}

}  // namespace dstc
