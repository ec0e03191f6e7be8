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

// A reshape's dims in groups whose sizes' products match: [b, s, t] ->
// [b, s, k, n, d] has groups {b}->{b}, {s}->{s}, {t}->{k, n, d}.
struct ReshapeGroup {
  int in_begin, in_end, out_begin, out_end;
};

std::vector<ReshapeGroup> reshape_groups(const LogicalGraph& g, const LogicalOp& op) {
  const auto& in = g.tensors[op.inputs[0].tensor].dims;
  const auto& out = g.tensors[op.output].dims;
  const int n_in = static_cast<int>(in.size()), n_out = static_cast<int>(out.size());
  std::vector<ReshapeGroup> groups;
  int i = 0, j = 0;
  while (i < n_in && j < n_out) {
    ReshapeGroup grp{i, i, j, j};
    int64_t a = in[i++].size, b = out[j++].size;
    while (a != b) {
      if (a < b && i < n_in)
        a *= in[i++].size;
      else if (b < a && j < n_out)
        b *= out[j++].size;
      else
        break;
    }
    grp.in_end = i;
    grp.out_end = j;
    groups.push_back(grp);
  }
  if (!groups.empty()) {  // trailing size-1 dims join the last group
    groups.back().in_end = n_in;
    groups.back().out_end = n_out;
  }
  return groups;
}

// The outermost dim of [begin, end) that is not of size 1 (a size-1 dim
// holds no elements to cut), or begin when all are.
int outermost_sized(const std::vector<Dim>& dims, int begin, int end) {
  for (int a = begin; a < end; ++a)
    if (dims[a].size != 1) return a;
  return begin;
}

// A reshape keeps a split when it is on the outermost dim of its group on
// both sides, size-1 dims aside: then each device's chunk is one
// contiguous block either way ([b, s, h] -> [b, 1, s, h] keeps S(s) on s).
std::optional<AxisSignature> reshape_split(const LogicalGraph& g, const LogicalOp& op, const std::string& dim,
                                           std::string& why_not) {
  const auto& in_dims = g.tensors[op.inputs[0].tensor].dims;
  const auto& out_dims = g.tensors[op.output].dims;
  for (const ReshapeGroup& grp : reshape_groups(g, op)) {
    const int in_first = outermost_sized(in_dims, grp.in_begin, grp.in_end);
    const int out_first = outermost_sized(out_dims, grp.out_begin, grp.out_end);
    bool first_in = grp.in_begin < grp.in_end && op.inputs[0].dims[in_first] == dim;
    bool first_out = grp.out_begin < grp.out_end && op.output_dims[out_first] == dim;
    bool inside = false;
    for (int a = grp.in_begin; a < grp.in_end; ++a) inside |= op.inputs[0].dims[a] == dim;
    for (int a = grp.out_begin; a < grp.out_end; ++a) inside |= op.output_dims[a] == dim;
    if (!inside) continue;
    if (!first_in && !first_out) {
      why_not =
          fmt::format("reshape can split '{}' only where it is the outermost of the dims it merges or splits", dim);
      return std::nullopt;
    }
    AxisSignature sig;
    sig.inputs = {split(in_first)};
    sig.output = split(out_first);
    return sig;
  }
  why_not = fmt::format("reshape has no dim '{}'", dim);
  return std::nullopt;
}

// An op that cannot split its input's `axes` (normalized, windowed or joined dims).
std::optional<AxisSignature> split_unless(const LogicalOp& op, const std::string& dim, std::initializer_list<int> axes,
                                          std::string_view what, std::string& why_not) {
  int a = axis_of(op.inputs[0].dims, dim);
  for (int refused : axes) {
    if (a == refused) {
      why_not = fmt::format("{} {} '{}', which it cannot split", ops::op_name(op.type), what, dim);
      return std::nullopt;
    }
  }
  return split_by_name(op, dim);
}

}  // namespace

ir::Sbp dual(ir::Sbp s) {
  if (s.kind == ir::Sbp::Broadcast) return kPartial;
  // A partial max's gradient: every part needs the whole incoming gradient.
  if (s.kind == ir::Sbp::PartialSum || s.kind == ir::Sbp::PartialMax) return kBroadcast;
  return s;
}

std::string to_string(ir::Sbp s) {
  switch (s.kind) {
    case ir::Sbp::Broadcast: return "B";
    case ir::Sbp::Split: return fmt::format("S({})", s.dim);
    case ir::Sbp::PartialSum: return "P";
    case ir::Sbp::PartialMax: return "P(max)";
    case ir::Sbp::Flat: return "S(flat)";
  }
  return "?";
}

std::string to_string(const AxisCompute& c) {
  switch (c.kind) {
    case ir::Sbp::Broadcast: return "B";
    case ir::Sbp::Split: return fmt::format("S({})", c.dim);
    case ir::Sbp::PartialSum: return "P";
    case ir::Sbp::PartialMax: return "P(max)";
    case ir::Sbp::Flat: return "S(flat)";
  }
  return "?";
}

std::optional<AxisSignature> signature_for(const LogicalGraph& graph, const LogicalOp& op, const AxisCompute& choice,
                                           std::string& why_not) {
  const ops::OpDef& def = ops::op_def(op.type);
  const std::string_view name = def.name;
  AxisSignature sig;
  if (choice.kind == ir::Sbp::Broadcast) {
    sig.inputs.assign(op.inputs.size(), kBroadcast);
    sig.output = kBroadcast;
    sig.compute = choice;
    return sig;
  }

  if (choice.kind == ir::Sbp::PartialSum) {
    switch (def.partial) {
      case ops::PartialInputs::LinearInFirst:  // it arrives partial, the rest replicated
        sig.inputs.assign(op.inputs.size(), kBroadcast);
        sig.inputs[0] = kPartial;
        break;
      case ops::PartialInputs::LinearInAll: sig.inputs.assign(op.inputs.size(), kPartial); break;
      case ops::PartialInputs::NotLinear:
        why_not = fmt::format("{} is not linear in its input, so it cannot take a partial input", name);
        return std::nullopt;
    }
    sig.output = kPartial;
    sig.compute = choice;
    return sig;
  }

  const std::string& dim = choice.dim;
  if (!graph.op_has_dim(op, dim)) {
    why_not = fmt::format("{} has no dim '{}'", name, dim);
    return std::nullopt;
  }
  const std::vector<std::string>& x = op.inputs[0].dims;
  const int last = static_cast<int>(x.size()) - 1;
  const std::string_view refusal = def.split.refusal;
  std::optional<AxisSignature> r;
  switch (def.split.kind) {
    case ops::SplitRule::ByName: r = split_by_name(op, dim); break;
    case ops::SplitRule::Elementwise:
      r = split_by_name(op, dim);
      if (r->output.kind != ir::Sbp::Split) {
        why_not = fmt::format("{} has no output dim '{}'", name, dim);
        return std::nullopt;
      }
      break;
    case ops::SplitRule::RefuseAttrDim: r = split_unless(op, dim, {op.axis}, refusal, why_not); break;
    case ops::SplitRule::RefuseLastDim: r = split_unless(op, dim, {last}, refusal, why_not); break;
    case ops::SplitRule::RefuseWindow: r = split_unless(op, dim, {2, 3}, refusal, why_not); break;
    case ops::SplitRule::RefuseKernelAndWindow:
      // x[n, c, h, w], w[o, c, kh, kw]: n and o split the output, c makes it
      // partial; the spatial dims and the kernel's are windows.
      if (int a = axis_of(op.inputs[1].dims, dim); a >= 2) {
        why_not = fmt::format("{} cannot split its kernel dim '{}'", name, dim);
        return std::nullopt;
      }
      r = split_unless(op, dim, {2, 3}, refusal, why_not);
      break;
    case ops::SplitRule::VocabParallelClasses:
      // The class dim split: the vocabulary-parallel loss (Megatron-LM's
      // vocab_parallel_cross_entropy), whose maxima and sums are
      // all-reduced inside the op, so every shard holds the whole loss.
      if (axis_of(x, dim) == last) {
        r.emplace();
        r->inputs = {split(last), kBroadcast};
        r->output = kBroadcast;
        break;
      }
      r = split_by_name(op, dim);
      break;
    case ops::SplitRule::ReshapeGroups: r = reshape_split(graph, op, dim, why_not); break;
    case ops::SplitRule::BatchAndHeadsOnly: {
      // By position: k and v's heads may be named apart from q's (GQA) and
      // split with them, each device keeping whole groups; either name
      // picks the position.
      int a = axis_of(x, dim);
      if (a < 0) a = axis_of(op.inputs[1].dims, dim);
      r.emplace();
      if (a == last - 1) {
        // Context parallelism: q's sequence split, k and v gathered whole
        // (their gradients partial, reduce-scattered back); each shard
        // masks causally from its own first position.
        r->inputs.assign(op.inputs.size(), kBroadcast);
        r->inputs[0] = {ir::Sbp::Split, static_cast<uint8_t>(a)};
        r->output = {ir::Sbp::Split, static_cast<uint8_t>(a)};
        break;
      }
      if (a < 0 || a + 2 > last) {
        why_not = fmt::format("{} can split only its batch, head and query sequence dims, not '{}'", name, dim);
        return std::nullopt;
      }
      r->inputs.assign(op.inputs.size(), ir::Sbp{ir::Sbp::Split, static_cast<uint8_t>(a)});
      r->output = {ir::Sbp::Split, static_cast<uint8_t>(a)};
      break;
    }
    case ops::SplitRule::RoutesTokens: {
      // dispatch x[.., s, h], gates[.., s, e] -> [.., e, c, h]; combine the
      // reverse. The group dims, e and h split by name (e leaves combine's
      // output partial: each device sums its experts). Slots follow token
      // order along s, so a split of s is a dispatch of each shard of the
      // tokens into its share of the slots: the same function only where
      // no token is dropped (capacity c >= s; each shard's c/n slots then
      // hold its s/n tokens), as Megatron-Core's dispatchers route each
      // sequence-parallel rank's own tokens. Elsewhere neither splits.
      const std::vector<std::string>& gates = op.inputs[1].dims;
      const bool dispatch = op.type == ops::OpKind::Dispatch;
      const int32_t routed_tensor = dispatch ? op.output : op.inputs[0].tensor;
      const std::vector<std::string>& routed = dispatch ? op.output_dims : op.inputs[0].dims;
      const std::string& slots = routed[routed.size() - 2];
      const std::string& tokens = gates[gates.size() - 2];
      const int64_t capacity = graph.tensors[routed_tensor].dims[routed.size() - 2].size;
      const int64_t positions = graph.tensors[op.inputs[1].tensor].dims[gates.size() - 2].size;
      if (dim == tokens && capacity >= positions) {
        const int slots_at = static_cast<int>(routed.size()) - 2, tokens_at = static_cast<int>(gates.size()) - 2;
        r = AxisSignature{};
        r->inputs = {split(dispatch ? axis_of(op.inputs[0].dims, tokens) : slots_at), split(tokens_at)};
        r->output = split(dispatch ? slots_at : axis_of(op.output_dims, tokens));
        break;
      }
      if (dim == tokens || dim == slots) {
        why_not = fmt::format(
            "{} pairs the slots {} with tokens in order along {}, so it cannot split '{}' where it drops tokens "
            "(capacity {} < {} positions)",
            name, slots, tokens, dim, capacity, positions);
        return std::nullopt;
      }
      r = split_by_name(op, dim);
      break;
    }
    case ops::SplitRule::ToPartialMax:
      r = split_by_name(op, dim);
      if (r->output.kind == ir::Sbp::PartialSum) r->output = {ir::Sbp::PartialMax, 0};
      break;
  }
  if (!r) return std::nullopt;
  r->compute = choice;
  return r;
}

std::vector<AxisSignature> candidate_signatures(const LogicalGraph& graph, const LogicalOp& op) {
  std::vector<AxisSignature> result;
  std::string why_not;
  auto add = [&](const AxisCompute& c) {
    if (auto sig = signature_for(graph, op, c, why_not)) result.push_back(std::move(*sig));
  };
  add({ir::Sbp::Broadcast, {}});
  for (const std::string& d : graph.op_dims(op)) add({ir::Sbp::Split, d});
  add({ir::Sbp::PartialSum, {}});
  return result;
}

}  // namespace dstc::compiler
