// `dstc verify` runs a step with real numbers on the CPU, so a full-size
// model can take hours and more memory than the machine has. This finds -D
// values under which the same strategy file compiles to a step that is
// cheap to verify, to suggest them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/pipeline/load_strategy.h"

namespace dstc {

struct VerifyScale {
  std::vector<std::string> defines;  // "name=value", in parameter-name order
  double work = 0;                   // reference::ProgramWork totals of both programs
  double bytes = 0;
};

// Halves the integer parameters of the strategy and its model (the user's
// -D values are the starting point; none goes below 2, so a mesh axis,
// layers and micro-batches stay plural), one at a time, keeping a halving
// only when the file still compiles and the step gets cheaper, until both
// programs together need at most `max_work` and `max_bytes`. nullopt when
// no parameter can be halved; otherwise the smallest step found, which may
// still be above the targets.
std::optional<VerifyScale> find_verify_scale(const StrategyRequest& request, const frontend::Strategy& strategy,
                                             double max_work, double max_bytes);

// "-D a=1 -D b=2".
std::string define_arguments(const std::vector<std::string>& defines);

}  // namespace dstc
