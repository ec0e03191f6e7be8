#include "compiler/driver/verify_programs.h"

#include <fmt/format.h>

#include "backends/reference/verify.h"
#include "ir/source/diagnostic_kinds.h"
#include "ir/verifier.h"

namespace dstc {

reference::ProgramWork VerifyPrograms::single_work() const {
  return reference::estimate_work(reference.module, *reference.module.find_function("train_step"));
}

reference::ProgramWork VerifyPrograms::strategy_work() const {
  return reference::estimate_work(compiled.module, *compiled.module.find_function("train_step"));
}

std::optional<VerifyPrograms> compile_verify_programs(const StrategyRequest& request, SourceManager& sources,
                                                      DiagnosticEngine& diags, bool& internal) {
  internal = false;
  std::optional<LoadedStrategy> loaded = load_strategy(request, sources, diags);
  if (!loaded) return std::nullopt;
  const frontend::Strategy& strategy = loaded->strategy->strategy;
  if (!strategy.run.training) {
    diags.error(diag::kVerifyInference, strategy.run.range,
                fmt::format("{} is an inference strategy; dstc verify compares one training step (loss, gradients, "
                            "updated weights) with the single-device model",
                            strategy.name));
    return std::nullopt;
  }
  if (strategy.run.fp8 == compiler::Fp8Recipe::Tensorwise) {
    diags
        .error(diag::kVerifyFp8Tensorwise, strategy.run.fp8_range,
               "tensorwise FP8 scales each rank's tensors by their own largest value, so a split step rounds "
               "differently from one device and verify cannot compare them")
        .note(strategy.run.range,
              "fp8 = blockwise scales every 128 elements of a row, which shards keep whole, so verify can "
              "compare it; or verify the strategy without fp8");
    return std::nullopt;
  }
  auto distributed = compiler::build_logical_program(strategy, diags);
  auto single = compiler::build_single_device_program(strategy, diags);
  if (!distributed || !single) return std::nullopt;
  auto compiled = compiler::compile_strategy(*distributed, sources, diags);
  if (!compiled) return std::nullopt;
  // Batch norm normalises each micro-batch by its own statistics, so with
  // one the reference must cut the batch as the strategy does.
  const int32_t reference_micro_batches =
      reference::reference_micro_batches(compiled->module, compiled->resolved.micro_batches);
  compiler::PlanOptions reference_plan;
  reference_plan.micro_batches = reference_micro_batches;
  auto reference = compiler::compile_strategy(*single, sources, diags, reference_plan);
  if (!reference || !ir::verify_module(compiled->module, diags) || !ir::verify_module(reference->module, diags) ||
      !compiled->module.find_function("train_step") || !reference->module.find_function("train_step")) {
    internal = true;
    return std::nullopt;
  }
  return VerifyPrograms{std::move(*loaded),   std::move(*distributed), std::move(*single),
                        std::move(*compiled), std::move(*reference),   reference_micro_batches};
}

}  // namespace dstc
