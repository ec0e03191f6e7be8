#include "compiler/driver/verify_programs.h"

#include <algorithm>

#include <fmt/format.h>

#include "backends/reference/verify.h"
#include "ir/registry.h"
#include "ir/source/diagnostic_kinds.h"
#include "ir/verifier.h"

namespace dstc {

reference::ProgramWork VerifyPrograms::single_work() const {
  return reference::estimate_work(reference.module, *reference::step_function(reference.module));
}

reference::ProgramWork VerifyPrograms::strategy_work() const {
  return reference::estimate_work(compiled.module, *reference::step_function(compiled.module));
}

namespace {

// Rowwise FP8 scales each row of the last dim, blockwise each 128
// elements of it: a shard whose rows are cut (rowwise), or cut into pieces
// not a multiple of 128 (blockwise), scales other groups than one device
// does, so the two steps round differently by construction.
bool scale_groups_kept_whole(const ir::Module& module, const frontend::Strategy& strategy, DiagnosticEngine& diags) {
  const bool rowwise = strategy.run.fp8 == compiler::Fp8Recipe::Rowwise;
  const ir::Function& f = module.functions.front();
  for (const ir::Op& op : f.ops) {
    if (op.kind != ir::OpKind::Quantize) continue;
    const ir::Value& x = f.values[f.operands(op)[0]];
    const ir::TensorType& t = module.value_type(f, f.operands(op)[0]);
    if (x.layout == ir::kNoLayout || t.rank == 0) continue;
    const ir::Layout& layout = module.layout(x.layout);
    const int64_t row = t.dim(t.rank - 1);
    bool split = std::any_of(layout.begin(), layout.end(),
                             [&](const ir::Sbp& s) { return s.kind == ir::Sbp::Split && s.dim == t.rank - 1; });
    if (!split || (!rowwise && row % 128 == 0)) continue;
    std::string_view scope = op.loc != ir::kNoLoc ? module.str(module.loc(op.loc).scope) : std::string_view{};
    std::string_view gemm = scope.empty() ? std::string_view{"a GEMM"} : scope;
    if (rowwise) {
      diags
          .error(diag::kVerifyFp8Rows, strategy.run.fp8_range,
                 fmt::format("rowwise FP8 scales each row by its largest value, but {} quantizes rows of {} "
                             "elements cut from longer ones on each device: its scales are not the single "
                             "device's, so the steps round differently",
                             gemm, row))
          .note(strategy.run.range,
                row % 128 == 0
                    ? "verify a strategy that splits no quantized tensor's last dim (data parallelism, FSDP, a "
                      "pipeline), or `fp8 = blockwise`, whose 128-element blocks these shards keep whole"
                    : "verify a strategy that splits no quantized tensor's last dim (data parallelism, FSDP, a "
                      "pipeline)");
      return false;
    }
    diags
        .error(diag::kVerifyFp8Blocks, strategy.run.fp8_range,
               fmt::format("blockwise FP8 scales every 128 elements of a row, but {} quantizes rows of {} elements "
                           "on each device: its blocks are not the single device's, so the steps round differently",
                           gemm, row))
        .note(strategy.run.range,
              "scale the model so that each shard's rows are multiples of 128 (-D), or verify "
              "the strategy without fp8");
    return false;
  }
  return true;
}

// Local batch norm normalizes each batch shard by its own rows, which the
// single-device reference reproduces by running one micro-batch per shard;
// batch norms cut into different numbers of shards have no such reference.
bool batch_norm_shards_agree(const ir::Module& module, const frontend::Strategy& strategy, DiagnosticEngine& diags) {
  const ir::Function& f = module.functions.front();
  const ir::Op* first = nullptr;
  int64_t first_shards = 0;
  for (const ir::Op& op : f.ops) {
    if (op.kind != ir::OpKind::BatchNormStats) continue;
    const int64_t shards = ir::AttrReader(module, f, op).integer("groups");
    if (!first) {
      first = &op, first_shards = shards;
      continue;
    }
    if (shards == first_shards) continue;
    auto scope = [&](const ir::Op& o) {
      return o.loc != ir::kNoLoc ? std::string(module.str(module.loc(o.loc).scope)) : std::string("a batch norm");
    };
    diags
        .error(diag::kVerifyBatchNormShards, strategy.run.range,
               fmt::format("with batch_norm = local, {} normalizes each of {} batch shards by its own rows and {} "
                           "each of {}: no single-device run cuts its batch both ways",
                           scope(*first), first_shards, scope(op), shards))
        .note(
            "lay out every batch norm's input alike over the axes that split the batch, or verify with "
            "batch_norm = sync");
    return false;
  }
  return true;
}

}  // namespace

std::optional<VerifyPrograms> compile_verify_programs(const StrategyRequest& request, SourceManager& sources,
                                                      DiagnosticEngine& diags, bool& internal) {
  internal = false;
  std::optional<LoadedStrategy> loaded = load_strategy(request, sources, diags);
  if (!loaded) return std::nullopt;
  const frontend::Strategy& strategy = loaded->strategy->strategy;
  if (strategy.run.fp8 == compiler::Fp8Recipe::Tensorwise) {
    diags
        .error(diag::kVerifyFp8Tensorwise, strategy.run.fp8_range,
               "tensorwise FP8 scales each rank's tensors by their own largest value, so a split step rounds "
               "differently from one device and verify cannot compare them")
        .note(strategy.run.range,
              "fp8 = blockwise scales every 128 elements of a row, which shards keep whole, and fp8 = rowwise "
              "each row, which shards that do not split rows keep whole, so verify can compare them; or "
              "verify the strategy without fp8");
    return std::nullopt;
  }
  auto distributed = compiler::build_logical_program(strategy, diags);
  auto single = compiler::build_single_device_program(strategy, diags);
  if (!distributed || !single) return std::nullopt;
  auto compiled = compiler::compile_strategy(*distributed, sources, diags);
  if (!compiled) return std::nullopt;
  if ((strategy.run.fp8 == compiler::Fp8Recipe::Blockwise || strategy.run.fp8 == compiler::Fp8Recipe::Rowwise) &&
      !scale_groups_kept_whole(compiled->module, strategy, diags))
    return std::nullopt;
  if (strategy.run.batch_norm == compiler::BatchNormStatistics::Local &&
      !batch_norm_shards_agree(compiled->module, strategy, diags))
    return std::nullopt;
  // Batch norm normalises each micro-batch by its own statistics, and a
  // load-balancing loss counts each micro-batch's routes, so with either the
  // reference must cut the batch as the strategy does.
  const int32_t reference_micro_batches =
      reference::reference_micro_batches(compiled->module, compiled->resolved.micro_batches);
  compiler::PlanOptions reference_plan;
  reference_plan.micro_batches = reference_micro_batches;
  auto reference = compiler::compile_strategy(*single, sources, diags, reference_plan);
  if (!reference || !ir::verify_module(compiled->module, diags) || !ir::verify_module(reference->module, diags) ||
      !reference::step_function(compiled->module) || !reference::step_function(reference->module)) {
    internal = true;
    return std::nullopt;
  }
  return VerifyPrograms{std::move(*loaded),   std::move(*distributed), std::move(*single),
                        std::move(*compiled), std::move(*reference),   reference_micro_batches};
}

}  // namespace dstc
