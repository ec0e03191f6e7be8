// The forward and backward lowering of each logical op type. A backward op
// reads the gradient of the op's output in the dual of the output's layout
// and leaves each input's gradient in the dual of the layout the op read
// that input in; every backward op is linear in the incoming gradient, so
// these dual signatures are always valid.
#include <algorithm>

#include <fmt/format.h>

#include "compiler/lowering/lowering_state.h"
#include "compiler/sbp/signature.h"

namespace dstc::compiler {
namespace {

// Single-letter einsum names for an op's dims.
struct EinsumLetters {
  std::vector<std::string> dims;
  std::string term(const std::vector<std::string>& names) const {
    std::string t;
    for (const std::string& n : names) {
      size_t i = std::find(dims.begin(), dims.end(), n) - dims.begin();
      t += static_cast<char>('a' + i);
    }
    return t;
  }
};

double loss_normalizer(const LogicalGraph& graph, const LogicalOp& op) {
  // The loss is the mean over every label of the global batch.
  return static_cast<double>(graph.tensors[op.inputs[1].tensor].numel());
}

}  // namespace

ir::ValueId Lowering::emit_forward_op(const Emit& at, int32_t op, const std::vector<ir::ValueId>& in) {
  const LogicalOp& lop = graph.ops[op];
  ir::Layout out = output_layout(op);
  using ir::AttrValue;
  using ir::OpKind;
  switch (lop.type) {
    case OpType::Einsum: {
      EinsumLetters letters{graph.op_dims(lop)};
      std::string spec_text;
      for (size_t i = 0; i < lop.inputs.size(); ++i) spec_text += (i ? "," : "") + letters.term(lop.inputs[i].dims);
      spec_text += "->" + letters.term(lop.output_dims);
      if (in.size() == 1) return append(at, OpKind::Einsum, {in[0]}, {AttrValue::string("spec", spec_text)}, out);
      return append(at, OpKind::Einsum, {in[0], in[1]}, {AttrValue::string("spec", spec_text)}, out);
    }
    case OpType::Add: return append(at, OpKind::Add, {in[0], in[1]}, {}, out);
    case OpType::Mul: return append(at, OpKind::Mul, {in[0], in[1]}, {}, out);
    case OpType::Gelu: return append(at, OpKind::Gelu, {in[0]}, {}, out);
    case OpType::Relu: return append(at, OpKind::Relu, {in[0]}, {}, out);
    case OpType::Softmax: return append(at, OpKind::Softmax, {in[0]}, {AttrValue::integer("dim", lop.axis)}, out);
    case OpType::LayerNorm:
      return append(at, OpKind::LayerNorm, {in[0], in[1], in[2]}, {AttrValue::real("eps", lop.eps)}, out);
    case OpType::Dropout: {
      std::vector<ir::ValueId> operands{in[0]};
      std::vector<AttrValue> attrs{AttrValue::real("p", lop.p), AttrValue::integer("seed", op)};
      ir::Layout mask = out;
      std::vector<ir::Layout> layouts{out, mask};
      std::vector<ir::ValueId> r = append_multi(at, OpKind::Dropout, operands, attrs, layouts);
      dropout_masks()[{op, at.micro_batch}] = r[1];
      return r[0];
    }
    case OpType::Embedding: {
      int axis = vocab_split_axis(op);
      return append(at, OpKind::Embedding, {in[0], in[1]}, {AttrValue::integer("offset_axis", axis)}, out);
    }
    case OpType::CrossEntropy: {
      ir::ValueId sum = append(at, OpKind::CrossEntropy, {in[0], in[1]}, {AttrValue::string("reduction", "sum")}, out);
      return append(at, OpKind::Scale, {sum}, {AttrValue::real("factor", 1.0 / loss_normalizer(graph, lop))}, out);
    }
    case OpType::Attention:
      return append(at, OpKind::Attention, {in[0], in[1], in[2]}, {AttrValue::boolean("causal", lop.causal)}, out);
  }
  throw std::logic_error(fmt::format("no forward lowering for {}", op_type_name(lop.type)));
}

std::vector<GradContribution> Lowering::emit_backward_op(const Emit& at, int32_t op,
                                                         const std::function<ir::ValueId(size_t)>& in, ir::ValueId y,
                                                         ir::ValueId g, bool input_grads, bool weight_grads) {
  const LogicalOp& lop = graph.ops[op];
  using ir::AttrValue;
  using ir::OpKind;
  std::vector<GradContribution> result;
  // Whether input i gets a gradient from this block, and where it is emitted.
  auto wanted = [&](size_t i) {
    int32_t t = lop.inputs[i].tensor;
    if (!needs_grad(t)) return false;
    return graph.tensors[t].kind == TensorKind::Param ? weight_grads : input_grads;
  };
  auto emit_at = [&](size_t i) {
    Emit e = at;
    e.phase =
        graph.tensors[lop.inputs[i].tensor].kind == TensorKind::Param ? ir::Phase::WeightGrad : ir::Phase::InputGrad;
    return e;
  };
  auto grad_layout_of = [&](size_t i) { return dual_layout(input_layout(op, i)); };
  // Sums a gradient over the leading dims a broadcast operand lacks.
  auto unbroadcast = [&](size_t i, ir::ValueId grad) {
    int lead = type_of(grad).rank - type_of(in(i)).rank;
    if (lead == 0) return grad;
    std::vector<int64_t> dims;
    for (int d = 0; d < lead; ++d) dims.push_back(d);
    return append(emit_at(i), OpKind::Sum, {grad}, {AttrValue::ints("dims", dims)}, grad_layout_of(i));
  };
  auto give = [&](size_t i, ir::ValueId grad) { result.push_back({static_cast<int>(i), grad}); };

  switch (lop.type) {
    case OpType::Einsum: {
      EinsumLetters letters{graph.op_dims(lop)};
      std::string z = letters.term(lop.output_dims);
      if (lop.inputs.size() == 1) {
        if (wanted(0)) {
          std::string spec_text = z + "->" + letters.term(lop.inputs[0].dims);
          give(0, append(emit_at(0), OpKind::Einsum, {g}, {AttrValue::string("spec", spec_text)}, grad_layout_of(0)));
        }
        break;
      }
      std::string x = letters.term(lop.inputs[0].dims), w = letters.term(lop.inputs[1].dims);
      if (wanted(0)) {
        give(0, append(emit_at(0), OpKind::Einsum, {g, in(1)}, {AttrValue::string("spec", z + "," + w + "->" + x)},
                       grad_layout_of(0)));
      }
      if (wanted(1)) {
        give(1, append(emit_at(1), OpKind::Einsum, {in(0), g}, {AttrValue::string("spec", x + "," + z + "->" + w)},
                       grad_layout_of(1)));
      }
      break;
    }
    case OpType::Add:
      if (wanted(0)) give(0, g);
      if (wanted(1)) give(1, unbroadcast(1, g));
      break;
    case OpType::Mul:
      if (wanted(0)) give(0, append(emit_at(0), OpKind::Mul, {g, in(1)}, {}, grad_layout_of(0)));
      if (wanted(1)) {
        ir::ValueId prod = append(emit_at(1), OpKind::Mul, {g, in(0)}, {}, dual_layout(output_layout(op)));
        give(1, unbroadcast(1, prod));
      }
      break;
    case OpType::Gelu:
      if (wanted(0)) give(0, append(emit_at(0), OpKind::GeluGrad, {g, in(0)}, {}, grad_layout_of(0)));
      break;
    case OpType::Relu:
      if (wanted(0)) give(0, append(emit_at(0), OpKind::ReluGrad, {g, in(0)}, {}, grad_layout_of(0)));
      break;
    case OpType::Softmax:
      if (wanted(0)) {
        give(0,
             append(emit_at(0), OpKind::SoftmaxGrad, {g, y}, {AttrValue::integer("dim", lop.axis)}, grad_layout_of(0)));
      }
      break;
    case OpType::LayerNorm:
      if (wanted(0)) {
        give(0, append(emit_at(0), OpKind::LayerNormGrad, {g, in(0), in(1)}, {AttrValue::real("eps", lop.eps)},
                       grad_layout_of(0)));
      }
      if (wanted(1) || wanted(2)) {
        std::vector<ir::ValueId> operands{g, in(0)};
        std::vector<AttrValue> attrs{AttrValue::real("eps", lop.eps)};
        std::vector<ir::Layout> layouts{grad_layout_of(1), grad_layout_of(2)};
        std::vector<ir::ValueId> r = append_multi(emit_at(1), OpKind::LayerNormWeightGrad, operands, attrs, layouts);
        if (wanted(1)) give(1, r[0]);
        if (wanted(2)) give(2, r[1]);
      }
      break;
    case OpType::Dropout:
      if (wanted(0)) {
        ir::ValueId mask = dropout_masks().at({op, at.micro_batch});
        give(0, append(emit_at(0), OpKind::DropoutGrad, {g, mask}, {AttrValue::real("p", lop.p)}, grad_layout_of(0)));
      }
      break;
    case OpType::Embedding:
      if (wanted(0)) {
        int64_t vocab = type_of(in(0)).dim(0);
        give(0, append(emit_at(0), OpKind::EmbeddingGrad, {g, in(1)},
                       {AttrValue::integer("vocab", vocab), AttrValue::integer("offset_axis", vocab_split_axis(op))},
                       grad_layout_of(0)));
      }
      break;
    case OpType::CrossEntropy:
      if (wanted(0)) {
        Emit e = emit_at(0);
        ir::ValueId scaled =
            append(e, OpKind::Scale, {g}, {AttrValue::real("factor", 1.0 / loss_normalizer(graph, lop))},
                   dual_layout(output_layout(op)));
        give(0, append(e, OpKind::CrossEntropyGrad, {scaled, in(0), in(1)}, {AttrValue::string("reduction", "sum")},
                       grad_layout_of(0)));
      }
      break;
    case OpType::Attention:
      if (wanted(0) || wanted(1) || wanted(2)) {
        std::vector<ir::ValueId> operands{g, in(0), in(1), in(2)};
        std::vector<AttrValue> attrs{AttrValue::boolean("causal", lop.causal)};
        std::vector<ir::Layout> layouts{grad_layout_of(0), grad_layout_of(1), grad_layout_of(2)};
        std::vector<ir::ValueId> r = append_multi(emit_at(0), OpKind::AttentionGrad, operands, attrs, layouts);
        for (size_t i = 0; i < 3; ++i)
          if (wanted(i)) give(i, r[i]);
      }
      break;
  }
  return result;
}

}  // namespace dstc::compiler
