#include "htae/ir_op_pricing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "ir/fp8_scales.h"

namespace dstc::htae {
namespace {

// [m, n, k] of one GEMM of an einsum "bsh,oh->bso": k the contracted dims, n
// the output dims only the second operand has, m those only the first has.
// Dims in both operands and the output (the experts of a mixture,
// "becd,bdf->becf") batch independent GEMMs of [m, n, k] each, which run at
// their own shape's efficiency, not at that of one GEMM with the batch folded
// into m: 128 tokens per expert reach 150-330 TFLOP/s on an H100, not the
// folded shape's 740 (bench/results/expert_gemms_h100_2026-11-26/). Dims that
// no fully filled tensor has are an expert's slots and count at `fill` (m in
// the forward and input gradient, k in the weight gradient); `full[i]` says
// whether operand i is fully filled, `full_out` the result.
std::vector<int64_t> einsum_gemm(std::string_view spec, std::span<const ir::TensorType> operands,
                                 std::span<const bool> full, bool full_out, double fill) {
  size_t arrow = spec.find("->");
  size_t comma = spec.find(',');
  if (arrow == std::string_view::npos || comma == std::string_view::npos || comma > arrow || operands.size() < 2)
    return {};
  std::string_view a = spec.substr(0, comma), b = spec.substr(comma + 1, arrow - comma - 1),
                   out = spec.substr(arrow + 2);
  auto has = [](std::string_view term, char letter) { return term.find(letter) != std::string_view::npos; };
  auto extent = [&](char letter) -> int64_t {
    if (size_t i = a.find(letter); i != std::string_view::npos && i < operands[0].rank)
      return operands[0].dim(static_cast<int>(i));
    if (size_t i = b.find(letter); i != std::string_view::npos && i < operands[1].rank)
      return operands[1].dim(static_cast<int>(i));
    return 1;
  };
  bool any_full = full[0] || full[1] || full_out;
  auto slots = [&](char letter) {
    return fill < 1 && any_full && !(full[0] && has(a, letter)) && !(full[1] && has(b, letter)) &&
           !(full_out && has(out, letter));
  };
  // Each of m, n, k as the product of its plain dims and of its slot dims.
  std::array<int64_t, 3> plain{1, 1, 1}, slotted{1, 1, 1};
  auto count = [&](size_t dim, char letter) { (slots(letter) ? slotted : plain)[dim] *= extent(letter); };
  for (char c : out) {
    if (has(a, c) && has(b, c)) continue;  // a batch dim
    count(has(a, c) ? 0 : 1, c);
  }
  for (char c : a)
    if (has(b, c) && !has(out, c)) count(2, c);
  std::vector<int64_t> mnk(3);
  for (size_t d = 0; d < 3; ++d) {
    int64_t filled = std::llround(static_cast<double>(slotted[d]) * (slotted[d] > 1 ? fill : 1.0));
    mnk[d] = plain[d] * std::max<int64_t>(filled, 1);
  }
  // Without a fully filled tensor to tell the slots apart, the rows fill.
  if (fill < 1 && !any_full) mnk[0] = std::max<int64_t>(std::llround(static_cast<double>(mnk[0]) * fill), 1);
  return mnk;
}

CollectivePhase direct_phase(std::span<const int64_t> group, size_t root, double bytes, bool from_root) {
  CollectivePhase phase;
  for (size_t i = 0; i < group.size(); ++i) {
    if (i == root) continue;
    phase.transfers.push_back(from_root ? Transfer{group[root], group[i], bytes}
                                        : Transfer{group[i], group[root], bytes});
  }
  return phase;
}

// An op on partly filled values (experts' slots) runs on the filled rows,
// so that a measured shape of the whole is not taken for it: a GEMM's m
// scaled, another op's shape as [rows x fill, last extent].
OpCostQuery filled_rows(OpCostQuery q, double fill, bool matmul) {
  if (fill >= 1 || q.shape.empty()) return q;
  auto scaled = [&](int64_t rows) {
    return std::max<int64_t>(1, static_cast<int64_t>(std::llround(static_cast<double>(rows) * fill)));
  };
  if (matmul) {
    q.shape[0] = scaled(q.shape[0]);
    return q;
  }
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < q.shape.size(); ++i) rows *= q.shape[i];
  q.shape = {scaled(rows), q.shape.back()};
  return q;
}

}  // namespace

ComputeDtype compute_dtype(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::F16: return ComputeDtype::Fp16;
    case ir::DType::BF16: return ComputeDtype::Bf16;
    case ir::DType::F8E4M3:
    case ir::DType::F8E5M2: return ComputeDtype::Fp8;
    default: return ComputeDtype::Fp32;
  }
}

ComputeDtype op_compute_dtype(const ir::Module& module, const ir::Function& f, const ir::Op& op) {
  for (ir::ValueId v : f.operands(op)) {
    ir::DType t = module.value_type(f, v).dtype;
    if (ir::is_float(t)) return compute_dtype(t);
  }
  if (op.result_count > 0) return compute_dtype(module.value_type(f, op.first_result).dtype);
  return ComputeDtype::Fp32;
}

OpCostQuery compute_query(const ir::Module& module, const ir::Function& f, const ir::Op& op, const ir::OpCost& cost) {
  OpCostQuery q;
  q.kind = std::string(ir::op_name(op.kind));
  q.op_class = ir::op_info(op.kind).cost_class;
  q.dtype = op_compute_dtype(module, f, op);
  if (q.dtype == ComputeDtype::Fp8) {
    for (ir::ValueId v : f.operands(op)) {
      if (std::optional<int64_t> block = ir::fp8_scale_block(module, f, v)) {
        q.fp8_scaling = ir::fp8_scaling(*block);
        break;
      }
    }
  }
  q.flops = cost.flops;
  q.bytes_read = cost.bytes;
  if (op.result_count == 0) return q;
  const ir::TensorType& out = module.value_type(f, op.first_result);
  if (q.op_class != OpClass::Matmul) {
    q.shape.assign(out.shape().begin(), out.shape().end());
    return filled_rows(q, ir::op_fill(f, op).fullest, false);
  }
  std::vector<ir::TensorType> operands;
  for (ir::ValueId v : f.operands(op)) operands.push_back(module.value_type(f, v));
  auto numel = static_cast<double>(std::max<int64_t>(out.numel(), 1));
  switch (op.kind) {
    case ir::OpKind::Matmul: {
      const ir::TensorType& a = operands[0];
      bool ta = ir::AttrReader(module, f, op).boolean("transpose_a");
      int64_t k = ta ? a.dim(a.rank - 2) : a.dim(a.rank - 1);
      int64_t n = out.rank > 0 ? out.dim(out.rank - 1) : 1;
      q.shape = {out.numel() / std::max<int64_t>(n, 1), n, k};
      break;
    }
    case ir::OpKind::Einsum: {
      std::span<const ir::ValueId> ids = f.operands(op);
      std::array<bool, 2> full{};
      for (size_t i = 0; i < std::min<size_t>(ids.size(), 2); ++i) full[i] = f.values[ids[i]].fill.fullest >= 1;
      q.shape = einsum_gemm(ir::AttrReader(module, f, op).string("spec"), operands, full,
                            f.values[op.first_result].fill.fullest >= 1, ir::op_fill(f, op).fullest);
      return q;
    }
    case ir::OpKind::Conv2d:
    case ir::OpKind::Conv2dInputGrad:
    case ir::OpKind::Conv2dWeightGrad: {
      int64_t channels = out.rank > 1 ? out.dim(1) : 1;
      auto k = static_cast<int64_t>(std::llround(cost.flops / (2 * numel)));
      q.shape = {out.numel() / std::max<int64_t>(channels, 1), channels, std::max<int64_t>(k, 1)};
      break;
    }
    default: {
      // Attention and its gradient: the output's last dim as n, the FLOPs per output element as k.
      int64_t n = out.rank > 0 ? out.dim(out.rank - 1) : 1;
      auto k = static_cast<int64_t>(std::llround(cost.flops / (2 * numel)));
      q.shape = {out.numel() / std::max<int64_t>(n, 1), n, std::max<int64_t>(k, 1)};
    }
  }
  return filled_rows(q, ir::op_fill(f, op).fullest, true);
}

CommSpec comm_spec(const ir::Module& module, const ir::Function& f, const ir::Op& op) {
  CommSpec s;
  s.kind = op.kind;
  // A grouped collective moves all its operands' bytes in one.
  double in = 0, out = 0;
  for (ir::ValueId v : f.operands(op)) in += static_cast<double>(module.value_bytes(f, v));
  for (int i = 0; i < op.result_count; ++i) out += static_cast<double>(module.value_bytes(f, f.result(op, i)));
  ir::AttrReader attrs(module, f, op);
  auto root = [&] { return static_cast<size_t>(std::max<int64_t>(attrs.integer("root"), 0)); };
  s.collective = collective_of(op.kind);
  // What each member moves: a recv, an all-gather and a scatter what they
  // receive, the others what they hold.
  bool received = op.kind == ir::OpKind::Recv || op.kind == ir::OpKind::AllGather || op.kind == ir::OpKind::Scatter;
  s.bytes = received ? out : in;
  // Experts' slots filled unevenly: the fullest member receives more than it sends.
  if (op.kind == ir::OpKind::AllToAll) {
    s.bytes = std::max(in, out);
    s.copies = attrs.integer("copies");
    s.experts = attrs.integer("experts");
    s.groups = {attrs.integer("groups"), attrs.integer("group_k")};
  }
  if (op.kind == ir::OpKind::Broadcast || op.kind == ir::OpKind::Reduce || op.kind == ir::OpKind::Scatter ||
      op.kind == ir::OpKind::Gather)
    s.root = root();
  s.efficiency_name = s.collective ? collective_name(*s.collective) : ir::op_name(op.kind);
  return s;
}

CollectivePlan comm_plan(const Topology& topology, const CommSpec& spec, std::span<const int64_t> group) {
  if (spec.copies > 1)
    return deduplicated_all_to_all(topology, group, spec.bytes, spec.copies, spec.experts, spec.groups);
  if (spec.collective) return plan_collective(topology, *spec.collective, group, spec.bytes, std::nullopt, spec.root);
  CollectivePlan plan{CollectiveKind::Broadcast, CollectiveAlgorithm::Direct, {}};
  if (group.size() > 1 && spec.root < group.size())
    plan.phases.push_back(direct_phase(group, spec.root, spec.bytes, spec.kind == ir::OpKind::Scatter));
  return plan;
}

}  // namespace dstc::htae
