// dstc verify FILE: compiles the strategy and the same model on one device,
// runs one training step of both on the CPU reference executor with the
// same weights and batch, and compares the loss, every gradient and every
// updated weight (docs/verify.md).
#include <ostream>

#include <fmt/format.h>

#include "backends/reference/verify.h"
#include "backends/reference/verify_diagnostics.h"
#include "compiler/bridge/bridge.h"
#include "compiler/compile_strategy.h"
#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/driver/strategy_loading.h"
#include "ir/verifier.h"

namespace dstc {
namespace {

struct VerifyOptions {
  StrategyRequest request;
  uint64_t seed = 0;
  double tolerance = 0;
  std::string arithmetic = "f32";
  bool no_layout_check = false;
};

int run_verify(CommandContext& ctx, const VerifyOptions& o) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  auto finish = [&](int code) {
    diags.render(ctx.err, ctx.color);
    return code;
  };
  std::optional<LoadedStrategy> loaded = load_strategy(o.request, sources, diags);
  if (!loaded) return finish(kExitInputErrors);
  const frontend::Strategy& strategy = loaded->strategy->strategy;
  if (!strategy.run.training) {
    diags.error(reference::diag::kVerifyInference, strategy.run.range,
                fmt::format("{} is an inference strategy; dstc verify compares one training step (loss, gradients, "
                            "updated weights) with the single-device model",
                            strategy.name));
    return finish(kExitInputErrors);
  }
  auto distributed = compiler::bridge_strategy(strategy, diags);
  auto single = compiler::bridge_single_device(strategy, diags);
  if (!distributed || !single) return finish(kExitInputErrors);
  auto compiled = compiler::compile_strategy(distributed->graph, distributed->spec, sources, diags);
  if (!compiled) return finish(kExitInputErrors);
  // Batch norm normalises each micro-batch by its own statistics, so with
  // one the reference must cut the batch as the strategy does.
  const int32_t reference_micro_batches =
      reference::reference_micro_batches(single->graph, compiled->resolved.micro_batches);
  if (reference_micro_batches > 1) {
    compiler::ScheduleConfig root;
    root.micro_batches = reference_micro_batches;
    single->spec.schedule[0] = root;
  }
  auto reference = compiler::compile_strategy(single->graph, single->spec, sources, diags);
  if (!reference || !ir::verify_module(compiled->module, diags) || !ir::verify_module(reference->module, diags)) {
    ctx.err << "dstc: internal error: the compiler could not produce verified IR for the strategy and its "
               "single-device model:\n";
    return finish(kExitInternal);
  }
  reference::VerifyOptions options;
  options.seed = o.seed;
  options.tolerance = o.tolerance;
  options.arithmetic = *reference::parse_arithmetic(o.arithmetic);
  options.check_layouts = !o.no_layout_check;
  reference::VerifyResult result =
      reference::compare_programs(distributed->graph, compiled->module, reference->module, options);
  ctx.out << fmt::format("{}: {} devices, {} ops; single device: {} ops; {} arithmetic, seed {}\n", strategy.name,
                         result.devices, compiled->module.functions.front().ops.size(),
                         reference->module.functions.front().ops.size(), o.arithmetic, o.seed);
  if (reference_micro_batches > 1)
    ctx.out << fmt::format(
        "reference: 1 device, {} micro-batches as in the strategy (batch norm normalises per "
        "micro-batch)\n",
        reference_micro_batches);
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
  sub->add_flag("--no-layout-check", o->no_layout_check,
                "Compare numbers only; do not track which values are partial sums");
  return {sub, [o](CommandContext& ctx) { return run_verify(ctx, *o); }};
}

}  // namespace dstc
