// A training run of a strategy's step function on every rank: bind the
// arguments (verify's deterministic weights and batch), warm-up steps,
// timed steps (the step time is the slowest rank's, each step ending at a
// barrier), then, when asked, the reference check of the first step.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "backends/runtime/device.h"
#include "backends/runtime/reference_check.h"

namespace dstc::runtime {

struct TrainingRunOptions {
  int32_t warmup = 1;  // steps run before the timed ones
  int32_t steps = 3;   // timed steps
  uint64_t seed = 0;
  reference::Arithmetic arithmetic = reference::Arithmetic::F32;
  bool check = false;
  double tolerance = 1e-4;
  // The reference also checks every value's declared layout (as verify).
  bool check_layouts = true;
  bool trace = false;  // record the last step's spans on every rank
};

struct StepFigures {
  int32_t step = 1;  // from 1, warm-up steps included
  bool warmup = false;
  double loss = 0;
  double seconds = 0;  // the slowest rank's
};

struct TrainingRunReport {
  std::vector<StepFigures> steps;
  std::vector<int64_t> peak_bytes;  // per rank
  std::optional<ReferenceCheck> check;
  // With options.trace: the last step on every rank, in seconds from its
  // start on that rank (steps start at a barrier).
  std::vector<ir::TraceOpSpan> spans;
  std::vector<ir::TraceMemory> memory;
};

// One rank's part: every rank calls it; rank 0's report has the figures.
// `on_step` is called on rank 0 after each step.
TrainingRunReport run_training(const ir::Module& module, const ir::Function& function, Communicator& comm,
                               Device& device, const TrainingRunOptions& options,
                               const std::function<void(const StepFigures&)>& on_step = {});

// Every rank as a thread of this process (thread_communicator.h), each on
// the device `open_device` gives it. A rank that fails ends the others;
// `failure` says which and why.
using DeviceFactory = std::function<std::unique_ptr<Device>(ir::Rank)>;
TrainingRunReport run_training_in_threads(const ir::Module& module, const ir::Function& function,
                                          const DeviceFactory& open_device, const TrainingRunOptions& options,
                                          const std::function<void(const StepFigures&)>& on_step,
                                          std::optional<std::string>& failure);

}  // namespace dstc::runtime
