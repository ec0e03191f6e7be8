// Contractions (einsum): the forward einsum, and each operand's gradient as
// an einsum of g with the other.
// One family's rules; autodiff.cpp picks the family from the op table.
#include <algorithm>
#include <numeric>

#include "compiler/lowering/lowering_helpers.h"
#include "ir/fp8_scales.h"

namespace dstc::compiler {

void Lowering::mark_fp8_ops() {
  std::vector<std::vector<int32_t>> consumers(graph.tensors.size());
  for (int32_t op = 0; op < static_cast<int32_t>(graph.ops.size()); ++op)
    for (const Operand& in : graph.ops[op].inputs) consumers[in.tensor].push_back(op);
  // A router's scores reach its top_k through a softmax or a bias, not a
  // contraction: a few ops.
  std::function<bool(int32_t, int)> scores_routing = [&](int32_t tensor, int depth) {
    for (int32_t op : consumers[tensor]) {
      const LogicalOp& c = graph.ops[op];
      if (c.type == ops::OpKind::TopK) return true;
      if (depth < 3 && c.type != ops::OpKind::Einsum && scores_routing(c.output, depth + 1)) return true;
    }
    return false;
  };
  auto in_repeat = [&](int32_t node) {
    for (; node >= 0; node = graph.nodes[node].parent)
      if (graph.nodes[node].repeated) return true;
    return false;
  };
  fp8_ops_.assign(graph.ops.size(), false);
  for (int32_t op = 0; op < static_cast<int32_t>(graph.ops.size()); ++op) {
    const LogicalOp& lop = graph.ops[op];
    if (lop.type != ops::OpKind::Einsum || lop.inputs.size() != 2) continue;
    int params = 0;
    for (const Operand& in : lop.inputs) params += graph.tensors[in.tensor].kind == TensorKind::Param;
    if (params != 1 || !ir::is_float(graph.tensors[lop.output].dtype) || !in_repeat(lop.node)) continue;
    fp8_ops_[op] = resolved.schedule[static_cast<size_t>(lop.node)].fp8 && !scores_routing(lop.output, 0);
  }
}

ir::ValueId Lowering::quantized(const Emit& at, ir::ValueId v, ir::DType dtype, const ir::Layout& layout) {
  if (type_of(v).dtype == dtype) return v;
  uint64_t key = static_cast<uint64_t>(v) << 8 | static_cast<uint64_t>(dtype);
  if (auto it = quantized_.find(key); it != quantized_.end()) return it->second;
  return quantized_[key] = quantize(at, v, dtype, layout);
}

ir::ValueId Lowering::quantize(const Emit& at, ir::ValueId v, ir::DType dtype, const ir::Layout& layout) {
  const ir::TensorType& t = type_of(v);
  if (t.dtype == dtype) return v;  // a weight served in fp8 (create_parameters)
  // Rowwise: one scale per row of the last dim. Blockwise: one per 128
  // elements of a row (fewer where the local row is shorter than or not a
  // multiple of 128).
  int64_t last = t.rank > 0 ? t.dim(t.rank - 1) : 1;
  int64_t block = spec.train.fp8 == Fp8Recipe::Blockwise ? std::gcd<int64_t>(128, last)
                  : spec.train.fp8 == Fp8Recipe::Rowwise ? ir::kRowwiseBlock
                                                         : 0;
  Emit e = at;
  e.fill = function_->values[v].fill;
  return append(e, ir::OpKind::Quantize, {v},
                {ir::AttrValue::string("dtype", ir::dtype_name(dtype)), ir::AttrValue::integer("block", block)},
                layout);
}

// torchao's rowwise linear keeps its compute-precision input and weight
// for the backward and casts each backward GEMM's operands afresh
// (float8_linear.py, manual_float8_matmul_with_args_in_hp), so what the
// backward holds is the value a forward copy was cast from, and the
// output gradient is cast once for each GEMM. A copy moved after its cast
// (a sequence-parallel gather) is read as it is.
ir::ValueId Lowering::recast_for_backward(const Emit& at, ir::ValueId copy, bool forward_copies_only) {
  const ir::Value& value = function_->values[copy];
  if (value.def == ir::kNone) return copy;
  const ir::Op& op = function_->ops[value.def];
  const bool forward = op.phase == ir::Phase::Forward || op.phase == ir::Phase::Recompute;
  if (op.kind != ir::OpKind::Quantize || (forward_copies_only && !forward)) return copy;
  const ir::Layout layout = module_.layout(value.layout);
  return quantize(at, function_->operands(op)[0], type_of(copy).dtype, layout);
}

ir::ValueId Lowering::fp8_input(const Emit& at, ir::ValueId v, const ir::Layout& from, const ir::Layout& to, bool reuse,
                                bool weight) {
  Emit boxing = at;
  boxing.stream = ir::Stream::Feature;
  // Quantized where it is stored and moved in fp8, as Transformer Engine
  // all-gathers a sequence-parallel input and FSDP2 a float8 weight: half
  // the bytes, and the stored shard is what the backward gathers again.
  // Partial sums are reduced first. Rows are scaled whole: flat chunks
  // cut rows and blocks apart, and pieces of rows that the boxing joins
  // (a gather along the last dim) are quantized joined, unless each piece
  // holds whole 128-element blocks.
  const ir::TensorType& t = type_of(v);
  const int last = t.rank - 1;
  auto row_splits = [&](const ir::Layout& layout) {
    return std::count_if(layout.begin(), layout.end(),
                         [&](const ir::Sbp& s) { return s.kind == ir::Sbp::Split && s.dim == last; });
  };
  const bool pieces_kept_whole = spec.train.fp8 == Fp8Recipe::Tensorwise ||
                                 (spec.train.fp8 == Fp8Recipe::Blockwise && t.rank > 0 && t.dim(last) % 128 == 0);
  const bool joins_rows = last >= 0 && row_splits(from) > row_splits(to) && !pieces_kept_whole;
  bool before = !joins_rows && std::none_of(from.begin(), from.end(), [&](const ir::Sbp& s) {
    return s.kind == ir::Sbp::PartialSum || s.kind == ir::Sbp::PartialMax ||
           (s.kind == ir::Sbp::Flat && spec.train.fp8 != Fp8Recipe::Tensorwise);
  });
  // torchao's linear layers (rowwise) cast their own input and weight at
  // every call, after any gather (torchao gathers in float8 only under
  // tensorwise scaling), so the gather itself is shared; Transformer
  // Engine casts a value once (a weight once a step), however many GEMMs
  // read it.
  const bool rowwise = spec.train.fp8 == Fp8Recipe::Rowwise;
  auto cast = [&](const Emit& where, ir::ValueId x, const ir::Layout& layout) {
    return rowwise ? quantize(where, x, ir::DType::F8E4M3, layout) : quantized(where, x, ir::DType::F8E4M3, layout);
  };
  // A weight's shard cast to be gathered is cast on the gathers' queue,
  // ahead of its use, as FSDP2 casts a float8 weight in the copy-in of an
  // all-gather it prefetches under the layer before.
  if (before && !(rowwise && from != to))
    return box(boxing, cast(weight && from != to ? boxing : at, v, from), from, to, reuse);
  return cast(at, box(boxing, v, from, to, reuse), to);
}

ir::ValueId Lowering::forward_contraction(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::Einsum: {
      const std::string& spec_text = einsum_specs(f.op).forward;
      if (fp8_op(f.op)) {
        // Its inputs arrive in e4m3 (fp8_input); the GEMM writes the
        // compute precision.
        return append(f.at, OpKind::Einsum, {f.in[0], f.in[1]},
                      {AttrValue::string("spec", spec_text),
                       AttrValue::string("dtype", ir::dtype_name(compute_dtype(f.lop.output)))},
                      f.out);
      }
      if (f.in.size() == 1)
        return append(f.at, OpKind::Einsum, {f.in[0]}, {AttrValue::string("spec", spec_text)}, f.out);
      return append(f.at, OpKind::Einsum, {f.in[0], f.in[1]}, {AttrValue::string("spec", spec_text)}, f.out);
    }
    default: no_forward_lowering(f.lop);
  }
}

void Lowering::backward_contraction(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::Einsum: {
      const EinsumSpecs& specs = einsum_specs(s.op);
      if (s.lop.inputs.size() == 1) {
        if (s.wanted(0))
          s.give(0, append(s.emit_at(0), OpKind::Einsum, {s.g}, {AttrValue::string("spec", specs.grads[0])},
                           s.grad_layout_of(0)));
        break;
      }
      if (fp8_op(s.op)) {
        // The gradient in e5m2 (its range), against the forward's e4m3
        // inputs (Transformer Engine keeps those copies; torchao's rowwise
        // linear casts both operands of each GEMM again). A partial
        // gradient (the op replicated on an axis) is
        // summed first, since each part's rounding is not the sum's; the
        // GEMMs then compute whole values, partialized back to the layouts
        // their gradients are expected in.
        const bool recast = spec.train.fp8 == Fp8Recipe::Rowwise;
        const std::string dtype(ir::dtype_name(compute_dtype(s.lop.output)));
        ir::Layout whole = s.g_layout;
        std::vector<size_t> summed;
        for (size_t a = 0; a < whole.size(); ++a) {
          if (whole[a].kind != ir::Sbp::PartialSum) continue;
          whole[a] = kBroadcast;
          summed.push_back(a);
        }
        for (size_t i = 0; i < 2; ++i) {
          if (!s.wanted(i)) continue;
          Emit e = s.emit_at(i);
          Emit boxing = e;
          boxing.stream = ir::Stream::Feature;
          // Under `recast` the weight gradient's GEMM casts g anew, where
          // the input gradient's GEMM read the first copy.
          ir::ValueId g = s.g;
          const bool fresh = recast && i == 1 && needs_grad(s.lop.inputs[0].tensor);
          if (!ir::is_fp8(type_of(g).dtype)) {
            ir::ValueId whole_g = box(boxing, g, s.g_layout, whole);
            g = fresh ? quantize(e, whole_g, ir::DType::F8E5M2, whole)
                      : quantized(e, whole_g, ir::DType::F8E5M2, whole);
          } else if (fresh) {
            g = recast_for_backward(e, g, false);
          }
          ir::ValueId other = i == 0 ? s.in(1) : s.in(0);
          if (recast) other = recast_for_backward(e, other, true);
          ir::ValueId a = i == 0 ? g : other, b = i == 0 ? other : g;
          ir::Layout expected = s.grad_layout_of(i), computed = expected;
          for (size_t axis : summed)
            if (computed[axis].kind == ir::Sbp::PartialSum) computed[axis] = kBroadcast;
          ir::ValueId grad =
              append(e, OpKind::Einsum, {a, b},
                     {AttrValue::string("spec", specs.grads[i]), AttrValue::string("dtype", dtype)}, computed);
          s.give(i, box(boxing, grad, computed, expected));
        }
        break;
      }
      if (s.wanted(0)) {
        s.give(0, append(s.emit_at(0), OpKind::Einsum, {s.g, s.in(1)}, {AttrValue::string("spec", specs.grads[0])},
                         s.grad_layout_of(0)));
      }
      if (s.wanted(1)) {
        s.give(1, append(s.emit_at(1), OpKind::Einsum, {s.in(0), s.g}, {AttrValue::string("spec", specs.grads[1])},
                         s.grad_layout_of(1)));
      }
      break;
    }
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
