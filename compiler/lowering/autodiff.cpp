// The forward lowering of each logical op type, and the backward step that
// hands each op to its family's rules (backward_<family>.cpp). A backward
// op reads the gradient of the op's output in the dual of the output's
// layout and leaves each input's gradient in the dual of the layout the op
// read that input in; every backward op is linear in the incoming gradient,
// so these dual signatures are always valid.
#include <algorithm>

#include <fmt/format.h>

#include "compiler/lowering/lowering_helpers.h"
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

}  // namespace

const Lowering::EinsumSpecs& Lowering::einsum_specs(int32_t op) {
  if (einsum_specs_.empty()) einsum_specs_.resize(graph.ops.size());
  EinsumSpecs& specs = einsum_specs_[op];
  if (!specs.forward.empty()) return specs;
  const LogicalOp& lop = graph.ops[op];
  EinsumLetters letters{graph.op_dims(lop)};
  std::string z = letters.term(lop.output_dims);
  if (lop.inputs.size() == 1) {
    std::string x = letters.term(lop.inputs[0].dims);
    specs.forward = x + "->" + z;
    specs.grads[0] = z + "->" + x;
    return specs;
  }
  std::string x = letters.term(lop.inputs[0].dims), w = letters.term(lop.inputs[1].dims);
  specs.forward = x + "," + w + "->" + z;
  specs.grads[0] = z + "," + w + "->" + x;
  specs.grads[1] = x + "," + z + "->" + w;
  return specs;
}

ir::ValueId Lowering::emit_forward_op(const Emit& at, int32_t op, const std::vector<ir::ValueId>& in) {
  const LogicalOp& lop = graph.ops[op];
  ir::Layout out = output_layout(op);
  using ir::AttrValue;
  using ir::OpKind;
  if (const ir::PointwiseOp* p = ops::op_def(lop.type).pointwise) return append(at, p->kind, {in[0]}, {}, out);
  switch (lop.type) {
    case ops::OpKind::Einsum: {
      const std::string& spec_text = einsum_specs(op).forward;
      if (in.size() == 1) return append(at, OpKind::Einsum, {in[0]}, {AttrValue::string("spec", spec_text)}, out);
      return append(at, OpKind::Einsum, {in[0], in[1]}, {AttrValue::string("spec", spec_text)}, out);
    }
    case ops::OpKind::Add: return append(at, OpKind::Add, {in[0], in[1]}, {}, out);
    case ops::OpKind::Sub: return append(at, OpKind::Sub, {in[0], in[1]}, {}, out);
    case ops::OpKind::Mul: return append(at, OpKind::Mul, {in[0], in[1]}, {}, out);
    case ops::OpKind::Div: return append(at, OpKind::Div, {in[0], in[1]}, {}, out);
    case ops::OpKind::Maximum: return append(at, OpKind::Maximum, {in[0], in[1]}, {}, out);
    case ops::OpKind::Exp: return append(at, OpKind::Exp, {in[0]}, {}, out);
    case ops::OpKind::Sqrt: return append(at, OpKind::Sqrt, {in[0]}, {}, out);
    case ops::OpKind::Scale: return append(at, OpKind::Scale, {in[0]}, {AttrValue::real("factor", lop.factor)}, out);
    case ops::OpKind::LogSoftmax:
      return append(at, OpKind::LogSoftmax, {in[0]}, {AttrValue::integer("dim", lop.axis)}, out);
    case ops::OpKind::RmsNorm: {
      std::vector<AttrValue> attrs{AttrValue::real("eps", lop.eps)};
      return append_multi(at, OpKind::RmsNorm, in, attrs, std::span<const ir::Layout>(&out, 1)).front();
    }
    case ops::OpKind::BatchNorm: {
      // SyncBN: per-channel sums, all-reduced where the batch (or a spatial
      // dim) is split, normalize with the global statistics.
      ir::Layout x_layout = input_layout(op, 0);
      ir::Layout local = stats_layout(x_layout);
      ir::Layout synced = synced_stats_layout(x_layout, local);
      std::vector<ir::Layout> layouts{local, local};
      std::vector<ir::ValueId> stats = append_multi(at, OpKind::BatchNormStats, {&in[0], 1}, {}, layouts);
      Emit comm = at;
      comm.stream = ir::Stream::Feature;
      ir::ValueId sum = box(comm, stats[0], local, synced);
      ir::ValueId sumsq = box(comm, stats[1], local, synced);
      save_extras(op, at.micro_batch, {sum, sumsq});
      return append(at, OpKind::BatchNormApply, {in[0], sum, sumsq, in[1], in[2]},
                    {AttrValue::integer("count", batchnorm_count(*this, op)), AttrValue::real("eps", lop.eps)}, out);
    }
    case ops::OpKind::Sum: return append(at, OpKind::Sum, {in[0]}, {AttrValue::ints("dims", to_ints(lop.axes))}, out);
    case ops::OpKind::Mean: {
      ir::ValueId sum = append(at, OpKind::Sum, {in[0]}, {AttrValue::ints("dims", to_ints(lop.axes))}, out);
      return append(at, OpKind::Scale, {sum}, {AttrValue::real("factor", 1.0 / mean_count(graph, lop))}, out);
    }
    case ops::OpKind::Max:
      return append(at, OpKind::ReduceMax, {in[0]}, {AttrValue::ints("dims", to_ints(lop.axes))}, out);
    case ops::OpKind::MseLoss: {
      // Summed squared difference (in f32), then 1/N over the global batch.
      ir::Layout x_layout = input_layout(op, 0);
      ir::ValueId diff = append(at, OpKind::Sub, {in[0], in[1]}, {}, x_layout);
      ir::ValueId squared = append(at, OpKind::Mul, {diff, diff}, {}, x_layout);
      if (type_of(squared).dtype != ir::DType::F32)
        squared = append(at, OpKind::Cast, {squared}, {AttrValue::string("dtype", "f32")}, x_layout);
      std::vector<int64_t> all;
      for (int d = 0; d < type_of(squared).rank; ++d) all.push_back(d);
      ir::ValueId sum = append(at, OpKind::Sum, {squared}, {AttrValue::ints("dims", all)}, out);
      return append(at, OpKind::Scale, {sum}, {AttrValue::real("factor", 1.0 / loss_normalizer(graph, lop))}, out);
    }
    case ops::OpKind::Conv2d:
      return append(at, OpKind::Conv2d, {in[0], in[1]},
                    {AttrValue::ints("stride", pair(lop.stride)), AttrValue::ints("padding", pair(lop.padding))}, out);
    case ops::OpKind::MaxPool2d:
    case ops::OpKind::AvgPool2d:
      return append(at, lop.type == ops::OpKind::MaxPool2d ? OpKind::MaxPool2d : OpKind::AvgPool2d, {in[0]},
                    {AttrValue::ints("kernel", pair(lop.kernel)), AttrValue::ints("stride", pair(lop.stride)),
                     AttrValue::ints("padding", pair(lop.padding))},
                    out);
    case ops::OpKind::Concat: {
      std::vector<AttrValue> attrs{AttrValue::integer("dim", lop.axis)};
      return append_multi(at, OpKind::Concat, in, attrs, std::span<const ir::Layout>(&out, 1)).front();
    }
    case ops::OpKind::Softmax: return append(at, OpKind::Softmax, {in[0]}, {AttrValue::integer("dim", lop.axis)}, out);
    case ops::OpKind::LayerNorm:
      return append(at, OpKind::LayerNorm, {in[0], in[1], in[2]}, {AttrValue::real("eps", lop.eps)}, out);
    case ops::OpKind::Dropout: {
      std::vector<ir::ValueId> operands{in[0]};
      std::vector<AttrValue> attrs{AttrValue::real("p", lop.p), AttrValue::integer("seed", op)};
      ir::Layout mask = out;
      std::vector<ir::Layout> layouts{out, mask};
      std::vector<ir::ValueId> r = append_multi(at, OpKind::Dropout, operands, attrs, layouts);
      save_extras(op, at.micro_batch, {r[1]});
      return r[0];
    }
    case ops::OpKind::Embedding: {
      int axis = vocab_split_axis(op);
      return append(at, OpKind::Embedding, {in[0], in[1]}, {AttrValue::integer("offset_axis", axis)}, out);
    }
    case ops::OpKind::CrossEntropy: {
      ir::ValueId sum = append(at, OpKind::CrossEntropy, {in[0], in[1]}, {AttrValue::string("reduction", "sum")}, out);
      return append(at, OpKind::Scale, {sum}, {AttrValue::real("factor", 1.0 / loss_normalizer(graph, lop))}, out);
    }
    case ops::OpKind::Attention:
      return append(at, OpKind::Attention, {in[0], in[1], in[2]}, {AttrValue::boolean("causal", lop.causal)}, out);
    case ops::OpKind::Reshape: {
      ir::TensorType shape = local_type(lop.output, out, type_of(in[0]).dtype);
      std::vector<int64_t> dims(shape.shape().begin(), shape.shape().end());
      return append(at, OpKind::Reshape, {in[0]}, {AttrValue::ints("shape", dims)}, out);
    }
    case ops::OpKind::Select: {
      ir::Layout in_layout = input_layout(op, 0);
      ir::ValueId picked = append(at, OpKind::Slice, {in[0]},
                                  {AttrValue::integer("dim", lop.axis), AttrValue::integer("start", lop.index),
                                   AttrValue::integer("end", lop.index + 1)},
                                  in_layout);
      ir::TensorType shape = local_type(lop.output, out, type_of(in[0]).dtype);
      std::vector<int64_t> dims(shape.shape().begin(), shape.shape().end());
      return append(at, OpKind::Reshape, {picked}, {AttrValue::ints("shape", dims)}, out);
    }
    case ops::OpKind::Matmul:  // the logical graph builder rewrites these three
    case ops::OpKind::Identity:
    case ops::OpKind::GlobalAvgPool:
    default: break;  // the activations are lowered above, from their table
  }
  throw std::logic_error(fmt::format("no forward lowering for {}", ops::op_name(lop.type)));
}

bool Lowering::BackwardStep::wanted(size_t i) const {
  int32_t t = lop.inputs[i].tensor;
  if (!l.needs_grad(t)) return false;
  return l.graph.tensors[t].kind == TensorKind::Param ? weight_grads : input_grads;
}

Emit Lowering::BackwardStep::emit_at(size_t i) const {
  Emit e = at;
  e.phase =
      l.graph.tensors[lop.inputs[i].tensor].kind == TensorKind::Param ? ir::Phase::WeightGrad : ir::Phase::InputGrad;
  return e;
}

ir::Layout Lowering::BackwardStep::grad_layout_of(size_t i) const { return l.dual_layout(l.input_layout(op, i)); }

ir::ValueId Lowering::BackwardStep::unbroadcast(size_t i, ir::ValueId grad) {
  int lead = l.type_of(grad).rank - l.type_of(in(i)).rank;
  if (lead == 0) return grad;
  std::vector<int64_t> dims;
  for (int d = 0; d < lead; ++d) dims.push_back(d);
  return l.append(emit_at(i), ir::OpKind::Sum, {grad}, {ir::AttrValue::ints("dims", dims)}, grad_layout_of(i));
}

ir::ValueId Lowering::BackwardStep::expand(const Emit& e, ir::ValueId grad, size_t i,
                                           const std::vector<int32_t>& dims) {
  std::vector<int64_t> shape(l.type_of(in(i)).shape().begin(), l.type_of(in(i)).shape().end());
  return l.append(e, ir::OpKind::Expand, {grad},
                  {ir::AttrValue::ints("shape", shape), ir::AttrValue::ints("dims", to_ints(dims))}, grad_layout_of(i));
}

void Lowering::no_backward_rule(const LogicalOp& lop) {
  throw std::logic_error(fmt::format("no backward rule for {}", ops::op_name(lop.type)));
}

std::vector<GradContribution> Lowering::emit_backward_op(const Emit& at, int32_t op,
                                                         const std::function<ir::ValueId(size_t)>& in, ir::ValueId y,
                                                         ir::ValueId g, bool input_grads, bool weight_grads) {
  const LogicalOp& lop = graph.ops[op];
  BackwardStep s{*this, at, op, lop, in, y, g, input_grads, weight_grads, dual_layout(output_layout(op)), {}};
  if (const ir::PointwiseOp* p = ops::op_def(lop.type).pointwise) {
    if (s.wanted(0))
      s.give(0, append(s.emit_at(0), p->grad, {g, p->grad_reads == ir::GradReads::Output ? y : in(0)}, {},
                       s.grad_layout_of(0)));
    return std::move(s.result);
  }
  switch (ops::op_def(lop.type).family) {
    case ops::Family::Contraction: backward_contraction(s); break;
    case ops::Family::Elementwise: backward_elementwise(s); break;
    case ops::Family::Normalization: backward_normalization(s); break;
    case ops::Family::Reduction: backward_reduction(s); break;
    case ops::Family::Embedding: backward_embedding(s); break;
    case ops::Family::Loss: backward_loss(s); break;
    case ops::Family::Attention: backward_attention(s); break;
    case ops::Family::Convolution: backward_convolution(s); break;
    case ops::Family::Shape: backward_shape(s); break;
  }
  return std::move(s.result);
}

}  // namespace dstc::compiler
