// From the front end's elaborated model and strategy to the compiler's
// logical graph and strategy spec. The graph keeps the module tree and the
// ops' dim names; ops the IR expresses differently are rewritten here
// (matmul becomes einsum; global_avgpool a mean over the last two dims;
// identity disappears). Forms the IR cannot express (an elementwise operand
// that is not the other's trailing dims, attention not of rank 4, conv and
// pooling not over [batch, channels, h, w], batchnorm not over dim 1) are
// reported as unsupported-op.
#pragma once

#include <optional>

#include "compiler/frontend/strategy.h"
#include "compiler/logical/logical_program.h"
#include "compiler/strategy/strategy_spec.h"
#include "ir/source/diagnostics.h"

namespace dstc::compiler {

// The strategy as written. nullopt when the model uses what the compiler
// cannot lower (reported to `diags`).
std::optional<LogicalProgram> build_logical_program(const frontend::Strategy& strategy, DiagnosticEngine& diags);

// The same model and training config on a single device, with the batch in
// one micro-batch: the reference `dstc verify` compares against.
std::optional<LogicalProgram> build_single_device_program(const frontend::Strategy& strategy, DiagnosticEngine& diags);

}  // namespace dstc::compiler
