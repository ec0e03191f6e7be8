// The Chrome trace-event file of a run of an IR function, simulated
// (htae/report.h) or real (dstc run --trace): one process per rank, one
// thread per IR queue, each op's span named for what a user recognises
// (`blocks[3].mlp.fc1 forward mb2`) with the op beside, and a memory
// counter. Written by one function, so both open side by side in Perfetto.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>

#include "ir/module.h"

namespace dstc::ir {

struct TraceOpSpan {
  Rank rank = 0;
  OpId op = 0;
  double start = 0, end = 0;  // seconds
};

struct TraceMemory {
  Rank rank = 0;
  double time = 0;  // seconds
  int64_t live_bytes = 0;
};

// `ranks` get a process each, in this order; events are written as given.
void write_chrome_trace(std::ostream& out, const Module& module, const Function& f, std::span<const Rank> ranks,
                        std::span<const TraceOpSpan> spans, std::span<const TraceMemory> memory);

}  // namespace dstc::ir
