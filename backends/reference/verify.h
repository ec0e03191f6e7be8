// `dstc verify`'s core: runs one step of a distributed program and of the
// single-device program of the same model on the same weights and batch
// (argument_values.h), and compares, each gathered back to its logical
// tensor: for a training step the loss, every parameter's gradient (the
// optimizer's input), every updated weight and optimizer state; for an
// inference step the model's output.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "backends/reference/executor.h"
#include "ir/module.h"
#include "ir/source/diagnostics.h"

namespace dstc::reference {

enum class VerifiedProgram : uint8_t { SingleDevice, Strategy };

struct VerifyOptions {
  uint64_t seed = 0;
  double tolerance = 0;  // 0: default_tolerance(arithmetic)
  Arithmetic arithmetic = Arithmetic::F32;
  bool check_layouts = true;
  // Called after each op of either program (the single-device one runs first).
  std::function<void(VerifiedProgram, ir::OpId)> after_op;
};

// 1e-4 for f32, 1e-9 for f64, 5e-2 for native (bf16 and f16 values).
double default_tolerance(Arithmetic a);

// Where something happened in the distributed program.
struct ProgramPlace {
  ir::OpId op = ir::kNone;
  std::string op_text;   // the op as `dstc ir print` writes it
  std::string location;  // its .dstrat location "file:line:column", or ""
  std::string file;
  uint32_t line = 0, column = 0;
};

struct TensorDifference {
  // "loss", "gradient of W", "updated W", "updated W.adam_m", or
  // "replicas of <one of those>" when devices holding copies disagree.
  std::string tensor;
  std::vector<int64_t> index;  // the worst element, in the logical tensor
  double expected = 0;         // single-device value (replicas: the first copy)
  double actual = 0;           // distributed value (replicas: rank `rank`'s copy)
  double error = 0;            // |actual - expected| / (|expected| + rms(expected))
  ir::Rank rank = -1;
  ProgramPlace producer;  // the distributed op that computed it
};

struct VerifyResult {
  bool passed = false;
  bool training = true;  // false: an inference step, whose output was compared
  double tolerance = 0;
  // The distributed program stopped (a partial read, a layout mismatch, a
  // failed kernel); `at` is the op.
  std::optional<ExecutionProblem> problem;
  ProgramPlace at;
  // The single-device program stopped: a bug in dstc, not in the strategy.
  std::optional<ExecutionProblem> reference_problem;
  std::optional<TensorDifference> difference;  // the first tensor that differs
  std::string missing;                         // a tensor one program has and the other lacks
  size_t tensors_compared = 0;
  double worst_error = 0;
  std::string worst_tensor;
  double loss = 0, reference_loss = 0;
  size_t devices = 0, ops = 0, reference_ops = 0;
  double seconds = 0, reference_seconds = 0;
};

// How many micro-batches the single-device reference of a strategy that
// runs `strategy_micro_batches` must run to compute the same function: the
// strategy's count when its program takes statistics over the batch
// (batch norm's, a load-balancing loss's token counts: they are taken per
// micro-batch, so over the whole batch it would be another function), else
// 1 (the whole batch, which also checks that the strategy's micro-batches
// add up to it).
int32_t reference_micro_batches(const ir::Module& strategy, int32_t strategy_micro_batches);

// The step a compiled program runs: "train_step", or "forward" (inference).
const ir::Function* step_function(const ir::Module& module);

// Both programs must be of the same model (their data inputs name the same
// model inputs, docs/ir.md) and run the same kind of step.
VerifyResult compare_programs(const ir::Module& distributed, const ir::Module& single_device,
                              const VerifyOptions& options);

// A human-readable report: a pass line with the figures, or what differs.
void print_verify_result(std::ostream& out, const VerifyResult& result);

// A failed verification as a diagnostic at the .dstrat location of the op
// where the strategy's program goes wrong (found in `diags`' sources by
// path; without a location when the file is not loaded or the op has none).
// Nothing for a pass or a failure of the single-device program.
void report_verify_failure(const VerifyResult& result, DiagnosticEngine& diags);

}  // namespace dstc::reference
