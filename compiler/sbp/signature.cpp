#include "compiler/sbp/signature.h"

#include <algorithm>

#include <fmt/format.h>

namespace dstc::compiler {
namespace {

// Axis of `dim` in an operand's names, or -1.
int axis_of(const std::vector<std::string>& dims, const std::string& dim) {
  auto it = std::find(dims.begin(), dims.end(), dim);
  return it == dims.end() ? -1 : static_cast<int>(it - dims.begin());
}

// The einsum rule, which elementwise ops share: an operand holding the dim
// is split along it, the others are replicated; the output is split if it
// holds the dim and partial (a sum over the split dim) otherwise.
AxisSignature split_by_name(const LogicalOp& op, const std::string& dim) {
  AxisSignature sig;
  for (const Operand& in : op.inputs) {
    int a = axis_of(in.dims, dim);
    sig.inputs.push_back(a >= 0 ? split(a) : kBroadcast);
  }
  int out = axis_of(op.output_dims, dim);
  sig.output = out >= 0 ? split(out) : kPartial;
  return sig;
}

bool is_elementwise(OpType t) {
  return t == OpType::Add || t == OpType::Mul || t == OpType::Gelu || t == OpType::Relu || t == OpType::Dropout;
}

}  // namespace

ir::Sbp dual(ir::Sbp s) {
  if (s.kind == ir::Sbp::Broadcast) return kPartial;
  if (s.kind == ir::Sbp::PartialSum) return kBroadcast;
  return s;
}

std::string to_string(ir::Sbp s) {
  switch (s.kind) {
    case ir::Sbp::Broadcast: return "B";
    case ir::Sbp::Split: return fmt::format("S({})", s.dim);
    case ir::Sbp::PartialSum: return "P";
    case ir::Sbp::PartialMax: return "P(max)";
  }
  return "?";
}

std::string to_string(const AxisCompute& c) {
  switch (c.kind) {
    case AxisCompute::Broadcast: return "B";
    case AxisCompute::Split: return fmt::format("S({})", c.dim);
    case AxisCompute::Partial: return "P";
  }
  return "?";
}

std::optional<AxisSignature> signature_for(const LogicalGraph& graph, const LogicalOp& op, const AxisCompute& choice,
                                           std::string& why_not) {
  const std::string_view name = op_type_name(op.type);
  AxisSignature sig;
  if (choice.kind == AxisCompute::Broadcast) {
    sig.inputs.assign(op.inputs.size(), kBroadcast);
    sig.output = kBroadcast;
    sig.compute = choice;
    return sig;
  }

  if (choice.kind == AxisCompute::Partial) {
    // Linear in the first input: it arrives partial, the rest replicated.
    switch (op.type) {
      case OpType::Einsum:
      case OpType::Mul:
      case OpType::Dropout:
        sig.inputs.assign(op.inputs.size(), kBroadcast);
        sig.inputs[0] = kPartial;
        break;
      case OpType::Add: sig.inputs.assign(op.inputs.size(), kPartial); break;
      default:
        why_not = fmt::format("{} is not linear in its input, so it cannot take a partial input", name);
        return std::nullopt;
    }
    sig.output = kPartial;
    sig.compute = choice;
    return sig;
  }

  const std::string& dim = choice.dim;
  std::vector<std::string> dims = graph.op_dims(op);
  if (std::find(dims.begin(), dims.end(), dim) == dims.end()) {
    why_not = fmt::format("{} has no dim '{}'", name, dim);
    return std::nullopt;
  }
  const std::vector<std::string>& x = op.inputs[0].dims;
  switch (op.type) {
    case OpType::Einsum: sig = split_by_name(op, dim); break;
    case OpType::Softmax:
      if (axis_of(x, dim) == op.axis) {
        why_not = fmt::format("softmax normalizes over '{}', which it cannot split", dim);
        return std::nullopt;
      }
      sig = split_by_name(op, dim);
      break;
    case OpType::LayerNorm:
      if (axis_of(x, dim) == static_cast<int>(x.size()) - 1) {
        why_not = fmt::format("layernorm normalizes over '{}', which it cannot split", dim);
        return std::nullopt;
      }
      sig = split_by_name(op, dim);
      break;
    case OpType::Embedding: {
      // (table[v, h], ids): splitting v gives each device a vocabulary shard
      // whose lookups are partial sums; splitting h or an ids dim is a split.
      sig = split_by_name(op, dim);
      break;
    }
    case OpType::CrossEntropy: {
      const std::vector<std::string>& logits = op.inputs[0].dims;
      if (axis_of(logits, dim) == static_cast<int>(logits.size()) - 1) {
        why_not = fmt::format("cross_entropy needs all of the class dim '{}' on each device", dim);
        return std::nullopt;
      }
      sig = split_by_name(op, dim);
      break;
    }
    case OpType::Attention: {
      int a = axis_of(x, dim);
      if (a != 0 && a != 1) {
        why_not = fmt::format("attention can split only its batch and head dims, not '{}'", dim);
        return std::nullopt;
      }
      sig = split_by_name(op, dim);
      break;
    }
    default:
      if (!is_elementwise(op.type)) {
        why_not = fmt::format("{} cannot be split", name);
        return std::nullopt;
      }
      sig = split_by_name(op, dim);
      if (sig.output.kind != ir::Sbp::Split) {
        why_not = fmt::format("{} has no output dim '{}'", name, dim);
        return std::nullopt;
      }
      break;
  }
  sig.compute = choice;
  return sig;
}

std::vector<AxisSignature> candidate_signatures(const LogicalGraph& graph, const LogicalOp& op) {
  std::vector<AxisSignature> result;
  std::string why_not;
  auto add = [&](const AxisCompute& c) {
    if (auto sig = signature_for(graph, op, c, why_not)) result.push_back(std::move(*sig));
  };
  add({AxisCompute::Broadcast, {}});
  for (const std::string& d : graph.op_dims(op)) add({AxisCompute::Split, d});
  add({AxisCompute::Partial, {}});
  return result;
}

}  // namespace dstc::compiler
