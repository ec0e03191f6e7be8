// `dstc run --check`: after the first step, every rank's returned values
// (the loss, updated weights, master copies and optimizer states) against
// the reference executor's values for the same rank of the same program
// on the same arguments. The reference executor is what `dstc verify`
// proves equal to the single-device model, so a pass says the ranks, their
// transport and their collectives computed the model's training step.
#pragma once

#include <string>

#include "backends/reference/executor.h"
#include "backends/runtime/rank_executor.h"

namespace dstc::runtime {

struct ReferenceCheck {
  bool passed = false;
  double tolerance = 0;
  size_t compared = 0;  // local tensors compared, over every rank
  double worst_error = 0;
  std::string worst_tensor;  // a returned value's name, or "updated W" for an update
  ir::Rank worst_rank = -1;
  std::string failure;  // what differs, or why the reference could not run
};

// Collective: every rank calls it after the same step; rank 0 runs the
// reference and returns the result (other ranks get an empty one). The
// error of an element is |a - e| / (|e| + rms(e)), as verify's.
// `options` are the reference executor's; `tolerance` the largest error.
ReferenceCheck check_against_reference(const RankExecutor& executor, Communicator& comm,
                                       const reference::ArgumentSource& arguments,
                                       const reference::ExecutorOptions& options, double tolerance);

}  // namespace dstc::runtime
