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
  // The loss is the mean over every label (target element) of the global
  // batch, so micro-batch and data-parallel parts sum to it.
  return static_cast<double>(graph.tensors[op.inputs[1].tensor].numel());
}

// Elements a Mean averages: the global sizes of its reduced dims (a mean
// over the batch divides by the global batch, as the losses do).
double mean_count(const LogicalGraph& graph, const LogicalOp& op) {
  double n = 1;
  for (int32_t a : op.axes) n *= static_cast<double>(graph.tensors[op.inputs[0].tensor].dims[a].size);
  return n;
}

std::vector<int64_t> to_ints(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }

// The layout of a product of two values laid out `a` and `b` (a partial
// factor makes the product partial; otherwise they split alike).
ir::Layout product_layout(const ir::Layout& a, const ir::Layout& b) {
  ir::Layout out = a;
  for (size_t i = 0; i < a.size(); ++i) {
    if (b[i].kind == ir::Sbp::PartialSum || b[i].kind == ir::Sbp::Split) out[i] = b[i];
    if (a[i].kind == ir::Sbp::PartialSum) out[i] = a[i];
  }
  return out;
}

// Batchnorm's per-channel statistics on each mesh axis, given x's layout:
// a channel split keeps them split; another split makes them partial sums.
ir::Layout stats_layout(const ir::Layout& x) {
  ir::Layout out;
  for (ir::Sbp s : x) {
    if (s.kind == ir::Sbp::Split)
      out.push_back(s.dim == 1 ? split(0) : kPartial);
    else
      out.push_back(s);
  }
  return out;
}

// The same statistics summed over the axes where x is split along another
// dim than the channels (what SyncBN all-reduces); partial axes stay.
ir::Layout synced_stats_layout(const ir::Layout& x, const ir::Layout& stats) {
  ir::Layout out = stats;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].kind == ir::Sbp::Split && x[i].dim != 1) out[i] = kBroadcast;
  return out;
}

std::vector<int64_t> pair(int64_t v) { return {v, v}; }

// Elements per channel that batchnorm's statistics cover: the whole
// micro-batch over every device (SyncBN).
int64_t batchnorm_count(const Lowering& l, int32_t op) {
  int32_t x = l.graph.ops[op].inputs[0].tensor;
  ir::TensorType whole = l.local_type(x, ir::Layout(l.spec.mesh.axis_count(), kBroadcast), ir::DType::F32);
  return whole.numel() / whole.dim(1);
}

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
  // The layout g arrives in: the dual of the output's.
  const ir::Layout g_layout = dual_layout(output_layout(op));
  // g replicated back over the dims a reduction removed, in input i's shape.
  auto expand = [&](const Emit& e, ir::ValueId grad, size_t i, const std::vector<int32_t>& dims) {
    std::vector<int64_t> shape(type_of(in(i)).shape().begin(), type_of(in(i)).shape().end());
    return append(e, OpKind::Expand, {grad}, {AttrValue::ints("shape", shape), AttrValue::ints("dims", to_ints(dims))},
                  grad_layout_of(i));
  };

  if (const ir::PointwiseOp* p = ops::op_def(lop.type).pointwise) {
    if (wanted(0))
      give(0,
           append(emit_at(0), p->grad, {g, p->grad_reads == ir::GradReads::Output ? y : in(0)}, {}, grad_layout_of(0)));
    return result;
  }
  switch (lop.type) {
    case ops::OpKind::Einsum: {
      const EinsumSpecs& specs = einsum_specs(op);
      if (lop.inputs.size() == 1) {
        if (wanted(0))
          give(0,
               append(emit_at(0), OpKind::Einsum, {g}, {AttrValue::string("spec", specs.grads[0])}, grad_layout_of(0)));
        break;
      }
      if (wanted(0)) {
        give(0, append(emit_at(0), OpKind::Einsum, {g, in(1)}, {AttrValue::string("spec", specs.grads[0])},
                       grad_layout_of(0)));
      }
      if (wanted(1)) {
        give(1, append(emit_at(1), OpKind::Einsum, {in(0), g}, {AttrValue::string("spec", specs.grads[1])},
                       grad_layout_of(1)));
      }
      break;
    }
    case ops::OpKind::Add:
      if (wanted(0)) give(0, g);
      if (wanted(1)) give(1, unbroadcast(1, g));
      break;
    case ops::OpKind::Sub:
      if (wanted(0)) give(0, g);
      if (wanted(1)) {
        ir::ValueId neg = append(emit_at(1), OpKind::Scale, {g}, {AttrValue::real("factor", -1.0)}, g_layout);
        give(1, unbroadcast(1, neg));
      }
      break;
    case ops::OpKind::Mul:
      if (wanted(0)) give(0, append(emit_at(0), OpKind::Mul, {g, in(1)}, {}, grad_layout_of(0)));
      if (wanted(1)) {
        ir::ValueId prod =
            append(emit_at(1), OpKind::Mul, {g, in(0)}, {}, product_layout(g_layout, input_layout(op, 0)));
        give(1, unbroadcast(1, prod));
      }
      break;
    case ops::OpKind::Div:
      // y = a / b: da = g / b, db = -(g y) / b summed over b's broadcast.
      if (wanted(0)) give(0, append(emit_at(0), OpKind::Div, {g, in(1)}, {}, grad_layout_of(0)));
      if (wanted(1)) {
        Emit e = emit_at(1);
        ir::Layout l = product_layout(g_layout, output_layout(op));
        ir::ValueId gy = append(e, OpKind::Mul, {g, y}, {}, l);
        ir::ValueId q = append(e, OpKind::Div, {gy, in(1)}, {}, l);
        give(1, unbroadcast(1, append(e, OpKind::Scale, {q}, {AttrValue::real("factor", -1.0)}, l)));
      }
      break;
    case ops::OpKind::Maximum:
      if (wanted(0) || wanted(1)) {
        std::vector<ir::ValueId> operands{g, in(0), in(1)};
        std::vector<ir::Layout> layouts{grad_layout_of(0), g_layout};
        std::vector<ir::ValueId> r =
            append_multi(emit_at(wanted(0) ? 0 : 1), OpKind::MaximumGrad, operands, {}, layouts);
        if (wanted(0)) give(0, r[0]);
        if (wanted(1)) give(1, unbroadcast(1, r[1]));
      }
      break;
    case ops::OpKind::Exp:
      if (wanted(0)) give(0, append(emit_at(0), OpKind::Mul, {g, y}, {}, grad_layout_of(0)));
      break;
    case ops::OpKind::Sqrt:
      if (wanted(0)) {
        ir::ValueId q = append(emit_at(0), OpKind::Div, {g, y}, {}, grad_layout_of(0));
        give(0, append(emit_at(0), OpKind::Scale, {q}, {AttrValue::real("factor", 0.5)}, grad_layout_of(0)));
      }
      break;
    case ops::OpKind::Scale:
      if (wanted(0))
        give(0, append(emit_at(0), OpKind::Scale, {g}, {AttrValue::real("factor", lop.factor)}, grad_layout_of(0)));
      break;
    case ops::OpKind::LogSoftmax:
      if (wanted(0)) {
        give(0, append(emit_at(0), OpKind::LogSoftmaxGrad, {g, y}, {AttrValue::integer("dim", lop.axis)},
                       grad_layout_of(0)));
      }
      break;
    case ops::OpKind::RmsNorm:
      if (wanted(0)) {
        std::vector<ir::ValueId> operands{g, in(0)};
        if (lop.inputs.size() > 1) operands.push_back(in(1));
        std::vector<AttrValue> attrs{AttrValue::real("eps", lop.eps)};
        std::vector<ir::Layout> layouts{grad_layout_of(0)};
        give(0, append_multi(emit_at(0), OpKind::RmsNormGrad, operands, attrs, layouts).front());
      }
      if (lop.inputs.size() > 1 && wanted(1)) {
        give(1, append(emit_at(1), OpKind::RmsNormWeightGrad, {g, in(0)}, {AttrValue::real("eps", lop.eps)},
                       grad_layout_of(1)));
      }
      break;
    case ops::OpKind::BatchNorm:
      if (wanted(0) || wanted(1) || wanted(2)) {
        // dgamma = Σ dy·x̂ and dbeta = Σ dy are partial where x is split
        // along a non-channel dim; dx needs them summed (SyncBN backward).
        const std::vector<ir::ValueId>& stats = saved_extras(op, at.micro_batch);
        ir::Layout x_layout = input_layout(op, 0);
        ir::Layout local = stats_layout(dual_layout(x_layout));
        std::vector<AttrValue> attrs{AttrValue::integer("count", batchnorm_count(*this, op)),
                                     AttrValue::real("eps", lop.eps)};
        Emit e = emit_at(wanted(0) ? 0 : 1);
        std::vector<ir::ValueId> operands{g, in(0), stats[0], stats[1]};
        std::vector<ir::Layout> layouts{local, local};
        std::vector<ir::ValueId> w = append_multi(e, OpKind::BatchNormWeightGrad, operands, attrs, layouts);
        if (wanted(1)) give(1, w[0]);
        if (wanted(2)) give(2, w[1]);
        if (wanted(0)) {
          Emit comm = e;
          comm.stream = ir::Stream::Feature;
          ir::Layout synced = synced_stats_layout(x_layout, local);
          ir::ValueId dgamma = box(comm, w[0], local, synced);
          ir::ValueId dbeta = box(comm, w[1], local, synced);
          std::vector<ir::ValueId> dx_operands{g, in(0), stats[0], stats[1], in(1), dgamma, dbeta};
          std::vector<ir::Layout> dx_layout{grad_layout_of(0)};
          give(0, append_multi(e, OpKind::BatchNormInputGrad, dx_operands, attrs, dx_layout).front());
        }
      }
      break;
    case ops::OpKind::Sum:
    case ops::OpKind::Mean:
      if (wanted(0)) {
        Emit e = emit_at(0);
        ir::ValueId grad = g;
        if (lop.type == ops::OpKind::Mean)
          grad = append(e, OpKind::Scale, {g}, {AttrValue::real("factor", 1.0 / mean_count(graph, lop))}, g_layout);
        give(0, expand(e, grad, 0, lop.axes));
      }
      break;
    case ops::OpKind::Max:
      if (wanted(0)) {
        // Each part compares with the global maximum; ties all get dy.
        Emit comm = emit_at(0);
        comm.stream = ir::Stream::Feature;
        ir::Layout out = output_layout(op);
        ir::Layout whole = out;
        for (ir::Sbp& s : whole)
          if (s.kind == ir::Sbp::PartialMax) s = kBroadcast;
        ir::ValueId max = box(comm, y, out, whole);
        give(0, append(emit_at(0), OpKind::ReduceMaxGrad, {g, in(0), max}, {AttrValue::ints("dims", to_ints(lop.axes))},
                       grad_layout_of(0)));
      }
      break;
    case ops::OpKind::MseLoss:
      if (wanted(0) || wanted(1)) {
        // d/dprediction of Σ(p - t)² / N is 2 (p - t) g / N.
        Emit e = emit_at(wanted(0) ? 0 : 1);
        ir::Layout x_layout = input_layout(op, 0);
        ir::ValueId diff = append(e, OpKind::Sub, {in(0), in(1)}, {}, x_layout);
        ir::ValueId scaled =
            append(e, OpKind::Scale, {g}, {AttrValue::real("factor", 2.0 / loss_normalizer(graph, lop))}, g_layout);
        if (type_of(scaled).dtype != type_of(diff).dtype) {
          scaled = append(e, OpKind::Cast, {scaled}, {AttrValue::string("dtype", ir::dtype_name(type_of(diff).dtype))},
                          g_layout);
        }
        ir::ValueId dpred = append(e, OpKind::Mul, {diff, scaled}, {}, grad_layout_of(0));
        if (wanted(0)) give(0, dpred);
        if (wanted(1))
          give(1, append(emit_at(1), OpKind::Scale, {dpred}, {AttrValue::real("factor", -1.0)}, grad_layout_of(1)));
      }
      break;
    case ops::OpKind::Conv2d: {
      std::vector<ir::ValueId> operands;
      const std::vector<int64_t> stride = pair(lop.stride), padding = pair(lop.padding);
      std::vector<AttrValue> attrs{AttrValue::ints("stride", stride), AttrValue::ints("padding", padding)};
      if (wanted(0)) {
        operands = {g, in(0), in(1)};
        std::vector<ir::Layout> layouts{grad_layout_of(0)};
        give(0, append_multi(emit_at(0), OpKind::Conv2dInputGrad, operands, attrs, layouts).front());
      }
      if (wanted(1)) {
        operands = {g, in(0), in(1)};
        std::vector<ir::Layout> layouts{grad_layout_of(1)};
        give(1, append_multi(emit_at(1), OpKind::Conv2dWeightGrad, operands, attrs, layouts).front());
      }
      break;
    }
    case ops::OpKind::MaxPool2d:
    case ops::OpKind::AvgPool2d:
      if (wanted(0)) {
        give(0, append(emit_at(0), lop.type == ops::OpKind::MaxPool2d ? OpKind::MaxPool2dGrad : OpKind::AvgPool2dGrad,
                       {g, in(0)},
                       {AttrValue::ints("kernel", pair(lop.kernel)), AttrValue::ints("stride", pair(lop.stride)),
                        AttrValue::ints("padding", pair(lop.padding))},
                       grad_layout_of(0)));
      }
      break;
    case ops::OpKind::Concat: {
      // Each input's gradient is its slice of g.
      int64_t start = 0;
      for (size_t i = 0; i < lop.inputs.size(); ++i) {
        int64_t size = local_type(lop.inputs[i].tensor, input_layout(op, i), ir::DType::F32).dim(lop.axis);
        if (wanted(i)) {
          give(i, append(emit_at(i), OpKind::Slice, {g},
                         {AttrValue::integer("dim", lop.axis), AttrValue::integer("start", start),
                          AttrValue::integer("end", start + size)},
                         grad_layout_of(i)));
        }
        start += size;
      }
      break;
    }
    case ops::OpKind::Softmax:
      if (wanted(0)) {
        give(0,
             append(emit_at(0), OpKind::SoftmaxGrad, {g, y}, {AttrValue::integer("dim", lop.axis)}, grad_layout_of(0)));
      }
      break;
    case ops::OpKind::LayerNorm:
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
    case ops::OpKind::Dropout:
      if (wanted(0)) {
        ir::ValueId mask = saved_extras(op, at.micro_batch).front();
        give(0, append(emit_at(0), OpKind::DropoutGrad, {g, mask}, {AttrValue::real("p", lop.p)}, grad_layout_of(0)));
      }
      break;
    case ops::OpKind::Embedding:
      if (wanted(0)) {
        int64_t vocab = type_of(in(0)).dim(0);
        give(0, append(emit_at(0), OpKind::EmbeddingGrad, {g, in(1)},
                       {AttrValue::integer("vocab", vocab), AttrValue::integer("offset_axis", vocab_split_axis(op))},
                       grad_layout_of(0)));
      }
      break;
    case ops::OpKind::CrossEntropy:
      if (wanted(0)) {
        Emit e = emit_at(0);
        ir::ValueId scaled =
            append(e, OpKind::Scale, {g}, {AttrValue::real("factor", 1.0 / loss_normalizer(graph, lop))},
                   dual_layout(output_layout(op)));
        give(0, append(e, OpKind::CrossEntropyGrad, {scaled, in(0), in(1)}, {AttrValue::string("reduction", "sum")},
                       grad_layout_of(0)));
      }
      break;
    case ops::OpKind::Reshape:
      if (wanted(0)) {
        ir::TensorType shape = local_type(lop.inputs[0].tensor, input_layout(op, 0), type_of(g).dtype);
        std::vector<int64_t> dims(shape.shape().begin(), shape.shape().end());
        give(0, append(emit_at(0), OpKind::Reshape, {g}, {AttrValue::ints("shape", dims)}, grad_layout_of(0)));
      }
      break;
    case ops::OpKind::Select:
      if (wanted(0)) {
        // The gradient goes back to its index; the other indexes get zeros.
        Emit e = emit_at(0);
        ir::TensorType full = local_type(lop.inputs[0].tensor, input_layout(op, 0), type_of(g).dtype);
        std::vector<int64_t> one(full.shape().begin(), full.shape().end());
        int64_t size = one[lop.axis];
        one[lop.axis] = 1;
        ir::ValueId piece = append(e, OpKind::Reshape, {g}, {AttrValue::ints("shape", one)}, grad_layout_of(0));
        auto zeros = [&](int64_t n) {
          std::vector<int64_t> dims = one;
          dims[lop.axis] = n;
          return append(e, OpKind::Fill, {},
                        {AttrValue::ints("shape", dims), AttrValue::string("dtype", ir::dtype_name(full.dtype))},
                        grad_layout_of(0));
        };
        std::vector<ir::ValueId> parts;
        if (lop.index > 0) parts.push_back(zeros(lop.index));
        parts.push_back(piece);
        if (lop.index + 1 < size) parts.push_back(zeros(size - lop.index - 1));
        if (parts.size() == 1) {
          give(0, piece);
        } else {
          std::vector<AttrValue> attrs{AttrValue::integer("dim", lop.axis)};
          std::vector<ir::Layout> layouts{grad_layout_of(0)};
          give(0, append_multi(e, OpKind::Concat, parts, attrs, layouts).front());
        }
      }
      break;
    case ops::OpKind::Attention:
      if (wanted(0) || wanted(1) || wanted(2)) {
        std::vector<ir::ValueId> operands{g, in(0), in(1), in(2)};
        std::vector<AttrValue> attrs{AttrValue::boolean("causal", lop.causal)};
        std::vector<ir::Layout> layouts{grad_layout_of(0), grad_layout_of(1), grad_layout_of(2)};
        std::vector<ir::ValueId> r = append_multi(emit_at(0), OpKind::AttentionGrad, operands, attrs, layouts);
        for (size_t i = 0; i < 3; ++i)
          if (wanted(i)) give(i, r[i]);
      }
      break;
    case ops::OpKind::Matmul:  // the logical graph builder rewrites these three
    case ops::OpKind::Identity:
    case ops::OpKind::GlobalAvgPool:
    default:  // the activations are differentiated above, from their table
      throw std::logic_error(fmt::format("no backward rule for {}", ops::op_name(lop.type)));
  }
  return result;
}

}  // namespace dstc::compiler
