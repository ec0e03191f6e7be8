// The per-rank executor: runs one rank's projected program (ir/projection.h)
// of a training step on a Device, its ops in program order, communication
// through a Communicator on host tensors. Each value is freed after its
// last use on the rank; after a step, the updated weights and optimizer
// states become the next step's arguments, so steps train.
#pragma once

#include <optional>
#include <vector>

#include "backends/reference/executor.h"
#include "backends/runtime/communicator.h"
#include "backends/runtime/device.h"
#include "ir/chrome_trace.h"
#include "ir/module.h"
#include "ir/projection.h"

namespace dstc::runtime {

class RankExecutor {
 public:
  // Aborts the run (comm.abort) when the device cannot run an op of the
  // rank's program, naming it, or when an update does not match the
  // argument it replaces.
  RankExecutor(const ir::Module& module, const ir::Function& function, ir::Rank rank, Communicator& comm,
               Device& device);

  // This rank's part of every argument it holds; a failure aborts the run.
  void bind(const reference::ArgumentSource& arguments, reference::Arithmetic arithmetic);
  // One step (after the first: on the previous step's updates). With
  // `record`, the step's op spans and memory replace the recorded ones.
  void step(bool record = false);

  ir::Rank rank() const { return program_.rank; }
  const ir::Module& module() const { return module_; }
  const ir::Function& function() const { return function_; }
  // A returned value this rank holds after the last step, on the host.
  std::optional<reference::HostTensor> returned(ir::ValueId v) const;
  // This rank's share of the step's loss: the sum over ranks is the loss.
  double loss_share() const;
  // The most bytes the rank's values held at once, counted in their IR
  // dtypes (what a device would hold), over the steps run.
  int64_t peak_bytes() const { return peak_bytes_; }
  // The last recorded step: each op's span and the live bytes after it,
  // in seconds from the step's start on this rank.
  const std::vector<ir::TraceOpSpan>& spans() const { return spans_; }
  const std::vector<ir::TraceMemory>& memory() const { return memory_; }

 private:
  void run_op(size_t index);
  void store(ir::ValueId v, std::unique_ptr<DeviceValue> value);
  void release(ir::ValueId v);
  std::unique_ptr<DeviceValue> take(ir::ValueId v);  // moved out and released
  const DeviceValue& operand(ir::ValueId v, const ir::Op& op);
  bool lives_here(ir::ValueId v) const;
  void check_program();

  static constexpr size_t kNeverRead = ~size_t{0};
  const ir::Module& module_;
  const ir::Function& function_;
  Communicator& comm_;
  Device& device_;
  ir::RankProgram program_;
  int32_t micro_batches_ = 1;
  int64_t steps_ = 0;                        // steps run
  std::vector<ir::ValueId> next_arguments_;  // per return (reference/returned_values.h)
  std::vector<uint8_t> is_loss_;             // per return
  std::vector<size_t> last_use_;             // per value: index in program_.ops of its last reader
  std::vector<uint8_t> kept_;                // arguments and returns: never freed in a step
  std::vector<std::unique_ptr<DeviceValue>> values_;
  int64_t live_bytes_ = 0, peak_bytes_ = 0;
  std::vector<ir::TraceOpSpan> spans_;
  std::vector<ir::TraceMemory> memory_;
};

}  // namespace dstc::runtime
