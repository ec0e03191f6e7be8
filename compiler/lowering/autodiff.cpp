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
  const ForwardStep f{at, op, lop, in, output_layout(op)};
  if (const ir::PointwiseOp* p = ops::op_def(lop.type).pointwise) return append(at, p->kind, {in[0]}, {}, f.out);
  switch (ops::op_def(lop.type).family) {
    case ops::Family::Contraction: return forward_contraction(f);
    case ops::Family::Elementwise: return forward_elementwise(f);
    case ops::Family::Normalization: return forward_normalization(f);
    case ops::Family::Reduction: return forward_reduction(f);
    case ops::Family::Embedding: return forward_embedding(f);
    case ops::Family::Loss: return forward_loss(f);
    case ops::Family::Attention: return forward_attention(f);
    case ops::Family::Convolution: return forward_convolution(f);
    case ops::Family::Shape: return forward_shape(f);
    case ops::Family::Routing: return forward_routing(f);
  }
  no_forward_lowering(lop);
}

void Lowering::no_forward_lowering(const LogicalOp& lop) {
  // The logical graph builder rewrites matmul, global_avgpool and identity.
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
  e.fill = l.slots_fill(lop.inputs[i].tensor, l.input_layout(op, i));
  return e;
}

ir::Layout Lowering::BackwardStep::grad_layout_of(size_t i) const { return l.dual_layout(l.input_layout(op, i)); }

ir::ValueId Lowering::BackwardStep::unbroadcast(size_t i, ir::ValueId grad) {
  if (l.type_of(grad).rank == l.type_of(in(i)).rank) return grad;
  std::vector<int64_t> dims;
  for (int32_t d : dims_input_lacks(lop, i)) dims.push_back(d);
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
    case ops::Family::Routing: backward_routing(s); break;
  }
  return std::move(s.result);
}

}  // namespace dstc::compiler
