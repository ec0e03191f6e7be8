#include "ir/chrome_trace.h"

#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/queues.h"
#include "ir/registry.h"

namespace dstc::ir {

void write_chrome_trace(std::ostream& out, const Module& module, const Function& f, std::span<const Rank> ranks,
                        std::span<const TraceOpSpan> spans, std::span<const TraceMemory> memory) {
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto emit = [&](const nlohmann::ordered_json& e) {
    out << (first ? "" : ",\n") << e.dump();
    first = false;
  };
  for (Rank rank : ranks) {
    emit({{"ph", "M"},
          {"name", "process_name"},
          {"pid", rank},
          {"args", {{"name", fmt::format("rank {} (device {})", rank, module.mesh().physical(rank))}}}});
    emit({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
    for (int q = 0; q < kQueueCount; ++q) {
      emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", q}, {"args", {{"name", queue_name(q)}}}});
    }
  }
  for (const TraceOpSpan& span : spans) {
    const Op& op = f.ops[span.op];
    std::string label(op_name(op.kind));
    if (op.result_count > 0) label += " %" + module.value_name(f, op.first_result);
    // Named for what a user recognises: the layer it belongs to, the pass
    // and the micro-batch (`blocks[3].mlp.fc1 forward mb2`), the op beside.
    std::string name = label;
    if (op.loc != kNoLoc && module.loc(op.loc).scope) {
      name = fmt::format("{} {}", module.str(module.loc(op.loc).scope), phase_name(op.phase));
      if (op.micro_batch >= 0) name += fmt::format(" mb{}", op.micro_batch);
    }
    nlohmann::ordered_json args = {{"op", span.op}, {"ir", label}, {"phase", phase_name(op.phase)}};
    if (op.micro_batch >= 0) args["micro_batch"] = op.micro_batch;
    if (op.stage >= 0) args["stage"] = op.stage;
    emit({{"ph", "X"},
          {"name", name},
          {"cat", phase_name(op.phase)},
          {"pid", span.rank},
          {"tid", op_queue(op)},
          {"ts", span.start * 1e6},
          {"dur", (span.end - span.start) * 1e6},
          {"args", args}});
  }
  for (const TraceMemory& m : memory)
    emit({{"ph", "C"}, {"name", "memory"}, {"pid", m.rank}, {"ts", m.time * 1e6}, {"args", {{"bytes", m.live_bytes}}}});
  out << "\n]}\n";
}

}  // namespace dstc::ir
