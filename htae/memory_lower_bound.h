// A lower bound of the simulator's peak memory per device, from the IR
// alone, without running it: what `dstc search` uses to set aside
// configurations that cannot fit before paying for their simulation.
//
// The simulator keeps every argument (parameters, optimizer states, inputs)
// and the communication libraries' buffers for the whole step and allocates an op's results when it starts, while its
// operands are still held, so each device holds at least its arguments plus,
// for any one op it runs, that op's operands and results. Training adds the
// activations a micro-batch saves for its backward: a value a forward
// compute op of micro-batch 0 makes and one of its backward or recompute
// compute ops reads is created before the device's in-order compute queue
// reaches its first backward or recompute op (a schedule runs a
// micro-batch's forward before its backward) and freed only after that
// reader, so all of them are held at once when that op starts. A schedule
// that runs more micro-batches' forward whole before a device's first
// backward (GPipe: all of them; 1F1B: up to the pipeline ranks from the
// device's on) holds that many times as much, all of the same shapes: the
// caller, which knows the schedule, gives the count per device. Only the
// first micro-batch's ops are read: their shapes do not depend on the
// number of micro-batches, so the bound of a one-micro-batch compile of a
// strategy, with the counts of the strategy's own schedule, also bounds the
// strategy itself (search_memory_probe.h).
#pragma once

#include <cstdint>
#include <span>

#include "ir/mesh.h"
#include "ir/module.h"

namespace dstc::htae {

struct MemoryLowerBound {
  int64_t bytes = 0;           // the largest over devices of resident + held + max(working, saved)
  ir::Rank rank = 0;           // the device it is on
  int64_t resident_bytes = 0;  // that device's arguments
  int64_t held_bytes = 0;      // what communication libraries hold on it for the run
  int64_t working_bytes = 0;   // the largest forward op's operands and results on it
  int64_t saved_bytes = 0;     // what the micro-batches held save on it for their backward
};

// `micro_batches_held[rank]`: how many micro-batches' forward the device
// runs whole before its first backward op (at least 1; empty: 1 everywhere).
// `held_for_run[rank]`: bytes communication libraries hold on it for the
// whole run (comm_buffer_bytes, htae/comm_buffers.h; empty: none).
MemoryLowerBound memory_lower_bound(const ir::Module& module, const ir::Function& function,
                                    std::span<const int64_t> micro_batches_held = {},
                                    std::span<const int64_t> held_for_run = {});

}  // namespace dstc::htae
