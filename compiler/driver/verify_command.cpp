// dstc verify FILE: compiles the strategy and the same model on one device,
// runs one training step of both on the CPU reference executor with the
// same weights and batch, and compares the loss, every gradient and every
// updated weight (docs/verify.md).
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <ostream>

#include <fmt/format.h>

#include "backends/reference/verify.h"
#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/driver/human_units.h"
#include "compiler/driver/verify_programs.h"
#include "compiler/driver/verify_progress.h"
#include "compiler/driver/verify_scaling.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc {
namespace {

struct VerifyOptions {
  StrategyRequest request;
  uint64_t seed = 0;
  double tolerance = 0;
  std::string arithmetic = "f32";
  bool no_layout_check = false;
  double max_memory_gib = 0;  // 0: half of this machine's memory
  bool progress = false;      // also when stderr is not a terminal
};

// Half of this machine's memory: what a verify run may plan to hold.
double default_memory_limit() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? 0.5 * static_cast<double>(pages) * static_cast<double>(page) : 8.0 * (1ull << 30);
}

// The command line to run instead, with the -D values `scale` found.
std::string scaled_command(const VerifyOptions& o, const VerifyScale& scale) {
  std::string command = "dstc verify " + o.request.file;
  if (!o.request.strategy.empty()) command += " --strategy " + o.request.strategy;
  return command + " " + define_arguments(scale.defines);
}

// A smaller step of the same strategy that verifies in seconds, within
// 256 MiB and the memory limit.
std::optional<VerifyScale> smaller_step(const VerifyOptions& o, const frontend::Strategy& strategy,
                                        double work_per_second, double max_bytes) {
  constexpr double kTargetSeconds = 2, kTargetBytes = 256.0 * (1 << 20);
  return find_verify_scale(o.request, strategy, work_per_second * kTargetSeconds, std::min(kTargetBytes, max_bytes));
}

int run_verify(CommandContext& ctx, const VerifyOptions& o) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  auto finish = [&](int code) {
    diags.render(ctx.err, ctx.color);
    return code;
  };
  bool internal = false;
  std::optional<VerifyPrograms> programs = compile_verify_programs(o.request, sources, diags, internal);
  if (!programs) {
    if (!internal) return finish(kExitInputErrors);
    ctx.err << "dstc: internal error: the compiler could not produce verified IR for the strategy and its "
               "single-device model:\n";
    return finish(kExitInternal);
  }
  const frontend::Strategy& strategy = programs->strategy();
  const reference::ProgramWork single_work = programs->single_work(), strategy_work = programs->strategy_work();
  const double bytes = single_work.bytes + strategy_work.bytes;
  const double max_bytes = o.max_memory_gib > 0 ? o.max_memory_gib * (1ull << 30) : default_memory_limit();
  if (bytes > max_bytes) {
    auto error = diags.error(
        diag::kVerifyTooLarge, strategy.range,
        fmt::format("verifying {} at this size needs about {} of memory (every value of both programs on every "
                    "rank, as doubles), more than the {} allowed",
                    strategy.name, human_bytes(bytes), human_bytes(max_bytes)));
    error.note(o.max_memory_gib > 0 ? "the limit is --max-memory"
                                    : "the limit is half of this machine's memory; --max-memory sets another");
    if (std::optional<VerifyScale> scale =
            smaller_step(o, strategy, std::numeric_limits<double>::infinity(), max_bytes))
      error.note(fmt::format("{} {}: {}",
                             scale->bytes <= max_bytes ? "the same strategy at a smaller size needs"
                                                       : "the smallest size found still needs",
                             human_bytes(scale->bytes), scaled_command(o, *scale)));
    else
      error.note("scale the model down with -D name=value (docs/verify.md)");
    return finish(kExitInputErrors);
  }

  reference::VerifyOptions options;
  options.seed = o.seed;
  options.tolerance = o.tolerance;
  options.arithmetic = *reference::parse_arithmetic(o.arithmetic);
  options.check_layouts = !o.no_layout_check;
  const double total_work = single_work.total + strategy_work.total;
  VerifyProgress progress(ctx.err, ctx.err_is_terminal, single_work, strategy_work, [&](double seconds) {
    ctx.err << fmt::format("dstc verify: note: this step will take about {} on this machine\n",
                           human_duration(seconds));
    if (std::optional<VerifyScale> scale = smaller_step(o, strategy, total_work / seconds, max_bytes))
      ctx.err << fmt::format("dstc verify: note: at a smaller size it takes seconds: {}\n", scaled_command(o, *scale));
    ctx.err.flush();
  });
  // On a terminal, or when asked: otherwise what a run prints to a file or
  // a pipe would depend on how fast the machine is.
  if (ctx.err_is_terminal || o.progress)
    options.after_op = [&](reference::VerifiedProgram program, ir::OpId op) { progress.after_op(program, op); };
  reference::VerifyResult result =
      reference::compare_programs(programs->compiled.module, programs->reference.module, options);
  progress.clear();
  ctx.out << fmt::format("{}: {} devices, {} ops; single device: {} ops; {} arithmetic, seed {}\n", strategy.name,
                         result.devices, programs->compiled.module.functions.front().ops.size(),
                         programs->reference.module.functions.front().ops.size(), o.arithmetic, o.seed);
  if (programs->reference_micro_batches > programs->compiled.resolved.micro_batches)
    ctx.out << fmt::format(
        "reference: 1 device, {} micro-batches: each of the strategy's {} cut into its {} batch shards (with "
        "batch_norm = local each device's batch norms use its own rows' statistics)\n",
        programs->reference_micro_batches, programs->compiled.resolved.micro_batches,
        programs->reference_micro_batches / programs->compiled.resolved.micro_batches);
  else if (programs->reference_micro_batches > 1)
    ctx.out << fmt::format(
        "reference: 1 device, {} micro-batches as in the strategy (the model's batch statistics, of a batch norm "
        "or a load-balancing loss, are per micro-batch)\n",
        programs->reference_micro_batches);
  reference::print_verify_result(ctx.out, result);
  if (result.reference_problem) {
    ctx.err << "dstc: internal error: the single-device program failed to run\n";
    return finish(kExitInternal);
  }
  reference::report_verify_failure(result, diags);
  return finish(result.passed ? kExitSuccess : kExitInputErrors);
}

}  // namespace

Command add_verify_command(CLI::App& root) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* sub =
      root.add_subcommand("verify", "Prove on the CPU that a strategy computes what the single-device model computes");
  sub->add_option("file", o->request.file, "The .dstrat file")->required();
  sub->add_option("--strategy", o->request.strategy, "The strategy to verify (default: the file's only one)");
  sub->add_option("-D", o->request.defines, "Set a model or strategy parameter (scale the model down): -D name=value")
      ->allow_extra_args(false);
  sub->add_option("--seed", o->seed, "Seed of the random weights and batch")->capture_default_str();
  sub->add_option("--tol", o->tolerance,
                  "Largest accepted error |a - b| / (|b| + rms(b)) (default: 1e-4 for f32, 1e-9 for f64, 5e-2 "
                  "for native)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--arithmetic", o->arithmetic,
                  "Precision of every float value: f32, f64, or native (each value's own dtype)")
      ->transform(one_of({"f32", "f64", "native"}))
      ->capture_default_str();
  sub->add_option("--max-memory", o->max_memory_gib,
                  "Refuse to run when both programs need more than this many GiB (default: half of this "
                  "machine's memory)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--progress", o->progress,
                "Report progress on stderr also when it is not a terminal: a line after 2 s, then every 30 s");
  sub->add_flag("--no-layout-check", o->no_layout_check,
                "Compare numbers only; do not track which values are partial sums");
  return {sub, [o](CommandContext& ctx) { return run_verify(ctx, *o); }};
}

}  // namespace dstc
