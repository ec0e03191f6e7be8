#include "htae/memory_lower_bound.h"

#include <algorithm>
#include <vector>

#include "ir/groups.h"

namespace dstc::htae {

namespace {

// Per rank: what the micro-batches held save for their backward. Values of
// micro-batch 0's forward compute ops that one of its backward or recompute
// compute ops on the same devices reads.
std::vector<int64_t> saved_for_backward(const ir::Module& module, const ir::Function& f,
                                        std::span<const int64_t> micro_batches_held) {
  const auto ranks = static_cast<size_t>(module.mesh().size());
  std::vector<int64_t> saved(ranks, 0), saved_shared(ranks, 0);
  std::vector<uint8_t> read_backward(f.values.size(), 0);
  bool any = false;
  for (const ir::Op& op : f.ops) {
    bool backward =
        op.phase == ir::Phase::InputGrad || op.phase == ir::Phase::WeightGrad || op.phase == ir::Phase::Recompute;
    if (!backward || op.micro_batch != 0 || op.stream != ir::Stream::Compute) continue;
    for (ir::ValueId v : f.operands(op)) {
      if (f.values[v].devices == op.devices) read_backward[v] = 1, any = true;
    }
  }
  if (!any) return saved;  // inference
  // What is computed from the batch (inputs, and what is computed or
  // received from them) is saved once per micro-batch held; the rest
  // (weights' casts and gathers) is shared by all of them.
  std::vector<uint8_t> from_batch(f.values.size(), 0);
  for (const ir::Arg& a : f.args) from_batch[a.value] = a.kind == ir::ArgKind::Input;
  const std::vector<ir::OpId> pairs = ir::pair_channels(f);
  for (ir::OpId i = 0; i < f.ops.size(); ++i) {
    const ir::Op& op = f.ops[i];
    bool batch = false;
    for (ir::ValueId v : f.operands(op)) batch = batch || from_batch[v];
    if (op.kind == ir::OpKind::Recv && pairs[i] != ir::kNone) {
      for (ir::ValueId v : f.operands(f.ops[pairs[i]])) batch = batch || from_batch[v];
    }
    for (uint16_t r = 0; r < op.result_count; ++r) from_batch[op.first_result + r] = batch;
  }
  for (const ir::Op& op : f.ops) {
    if (op.phase != ir::Phase::Forward || op.micro_batch != 0 || op.stream != ir::Stream::Compute) continue;
    for (uint16_t r = 0; r < op.result_count; ++r) {
      ir::ValueId v = op.first_result + r;
      if (!read_backward[v]) continue;
      int64_t bytes = module.value_bytes(f, v);
      std::vector<int64_t>& into = from_batch[v] ? saved : saved_shared;
      for (ir::Rank rank : module.members(f.values[v].devices)) into[static_cast<size_t>(rank)] += bytes;
    }
  }
  for (size_t r = 0; r < ranks; ++r) {
    if (r < micro_batches_held.size()) saved[r] *= std::max<int64_t>(1, micro_batches_held[r]);
    saved[r] += saved_shared[r];
  }
  return saved;
}

}  // namespace

MemoryLowerBound memory_lower_bound(const ir::Module& module, const ir::Function& f,
                                    std::span<const int64_t> micro_batches_held,
                                    std::span<const int64_t> held_for_run) {
  const auto ranks = static_cast<size_t>(module.mesh().size());
  std::vector<int64_t> resident(ranks, 0);
  std::vector<uint8_t> is_arg(f.values.size(), 0);
  for (const ir::Arg& a : f.args) {
    is_arg[a.value] = 1;
    int64_t bytes = module.value_type(f, a.value).bytes();
    for (ir::Rank r : module.members(f.values[a.value].devices)) resident[static_cast<size_t>(r)] += bytes;
  }
  // The largest working set per device set first: ops repeat per layer and
  // micro-batch on a few sets.
  std::vector<int64_t> working_of_set;
  std::vector<ir::ValueId> counted;
  for (const ir::Op& op : f.ops) {
    if (op.phase != ir::Phase::Forward) continue;
    int64_t working = 0;
    counted.clear();
    for (ir::ValueId v : f.operands(op)) {
      // An operand held on only some of the op's devices is left out: the
      // bound stays below what every device of the set holds.
      if (is_arg[v] || (f.values[v].devices != op.devices && !module.includes(f.values[v].devices, op.devices)))
        continue;
      if (std::find(counted.begin(), counted.end(), v) != counted.end()) continue;
      counted.push_back(v);
      working += module.value_bytes(f, v);
    }
    for (uint16_t r = 0; r < op.result_count; ++r) working += module.value_bytes(f, op.first_result + r);
    working -= ir::bytes_in_operand(module, f, op);  // already resident
    if (op.devices >= working_of_set.size()) working_of_set.resize(op.devices + 1, 0);
    working_of_set[op.devices] = std::max(working_of_set[op.devices], working);
  }
  std::vector<int64_t> saved = saved_for_backward(module, f, micro_batches_held);
  std::vector<int64_t> working(ranks, 0);
  for (ir::DeviceSetId set = 0; set < working_of_set.size(); ++set) {
    if (working_of_set[set] == 0) continue;
    for (ir::Rank r : module.members(set)) {
      working[static_cast<size_t>(r)] = std::max(working[static_cast<size_t>(r)], working_of_set[set]);
    }
  }
  MemoryLowerBound bound;
  for (size_t r = 0; r < ranks; ++r) {
    const int64_t held = r < held_for_run.size() ? held_for_run[r] : 0;
    int64_t bytes = resident[r] + held + std::max(working[r], saved[r]);
    if (bytes <= bound.bytes && r > 0) continue;
    bound = {bytes, static_cast<ir::Rank>(r), resident[r], held, working[r], saved[r]};
  }
  return bound;
}

}  // namespace dstc::htae
