// Normalisations (softmax, log-softmax, layer, RMS and batch norm, SyncBN
// or local):
// forward ops and gradients.
// One family's rules; autodiff.cpp picks the family from the op table.
#include <array>

#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_normalization(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::LogSoftmax:
      return append(f.at, OpKind::LogSoftmax, {f.in[0]}, {AttrValue::integer("dim", f.lop.axis)}, f.out);
    case ops::OpKind::RmsNorm: {
      std::vector<AttrValue> attrs{AttrValue::real("eps", f.lop.attrs.real("eps"))};
      return append_multi(f.at, OpKind::RmsNorm, f.in, attrs, std::span<const ir::Layout>(&f.out, 1)).front();
    }
    case ops::OpKind::BatchNorm: {
      // SyncBN: per-channel sums, all-reduced where the batch (or a spatial
      // dim) is split, normalize with the global statistics. Local
      // statistics (DDP's BatchNorm): each batch shard normalizes with its
      // own rows' sums, all-reduced only where a spatial dim is split.
      const bool local_stats = spec.train.batch_norm == BatchNormStatistics::Local;
      ir::Layout x_layout = input_layout(f.op, 0);
      ir::Layout local = stats_layout(x_layout, type_of(f.in[0]).rank, local_stats);
      ir::Layout synced = synced_stats_layout(x_layout, local, local_stats);
      const int64_t groups = local_stats ? batch_shards(*this, x_layout) : 1;
      std::vector<ir::Layout> layouts{local, local};
      std::vector<AttrValue> stats_attrs;
      if (groups > 1) stats_attrs.push_back(AttrValue::integer("groups", groups));
      std::vector<ir::ValueId> stats = append_multi(f.at, OpKind::BatchNormStats, {&f.in[0], 1}, stats_attrs, layouts);
      Emit comm = f.at;
      comm.stream = ir::Stream::Feature;
      ir::ValueId sum = box(comm, stats[0], local, synced);
      ir::ValueId sumsq = box(comm, stats[1], local, synced);
      save_extras(f.op, f.at.micro_batch, {sum, sumsq});
      return append(f.at, OpKind::BatchNormApply, {f.in[0], sum, sumsq, f.in[1], f.in[2]},
                    {AttrValue::integer("count", batchnorm_count(*this, f.op) / groups),
                     AttrValue::real("eps", f.lop.attrs.real("eps"))},
                    f.out);
    }
    case ops::OpKind::Softmax:
      return append(f.at, OpKind::Softmax, {f.in[0]}, {AttrValue::integer("dim", f.lop.axis)}, f.out);
    case ops::OpKind::LayerNorm:
      return append(f.at, OpKind::LayerNorm, {f.in[0], f.in[1], f.in[2]},
                    {AttrValue::real("eps", f.lop.attrs.real("eps"))}, f.out);
    default: no_forward_lowering(f.lop);
  }
}

// Local batch norm's per-shard sums side by side (split S(0) over the axes
// that split the batch) summed into the parameter's gradient, partial over
// those axes: viewed as [shards, channels] and reduced over the shards.
ir::ValueId Lowering::sum_batch_shards(const Emit& at, ir::ValueId sums, const ir::Layout& shards,
                                       const ir::Layout& partial) {
  using ir::AttrValue;
  ir::Layout rows = shards;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].kind == ir::Sbp::Split) rows[i].dim = partial[i].kind == ir::Sbp::Split ? 1 : 0;
  const std::array<int64_t, 2> shape{1, type_of(sums).dim(0)};
  const std::array<int64_t, 1> shard_dim{0};
  ir::ValueId viewed = append(at, ir::OpKind::Reshape, {sums}, {AttrValue::ints("shape", shape)}, rows);
  return append(at, ir::OpKind::Sum, {viewed}, {AttrValue::ints("dims", shard_dim)}, partial);
}

ir::ValueId Lowering::z_loss_grad(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  // z_loss · mean over the step's R rows of lse(x)²: the mean of each
  // micro-batch's rows, averaged over the micro-batches, is the step's, so
  // d/dx = 2 · z_loss · lse · softmax(x) / R, whatever cuts the rows.
  // lse = x − log_softmax(x), the same along each row.
  const int32_t x = s.lop.inputs[0].tensor;
  const double rows = static_cast<double>(graph.tensors[x].numel()) /
                      static_cast<double>(graph.tensors[x].dims[static_cast<size_t>(s.lop.axis)].size);
  const ir::Layout layout = input_layout(s.op, 0);
  Emit e = s.emit_at(0);
  ir::ValueId log_probs = append(e, OpKind::LogSoftmax, {s.in(0)}, {AttrValue::integer("dim", s.lop.axis)}, layout);
  ir::ValueId lse = append(e, OpKind::Sub, {s.in(0), log_probs}, {}, layout);
  ir::ValueId grad = append(e, OpKind::Mul, {lse, s.y}, {}, layout);
  grad = append(e, OpKind::Scale, {grad}, {AttrValue::real("factor", 2.0 * s.lop.attrs.real("z_loss") / rows)}, layout);
  // Where the logits are replicated their gradient is partial: one device
  // adds the term.
  return box(e, grad, layout, s.grad_layout_of(0));
}

void Lowering::backward_normalization(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::LogSoftmax:
      if (s.wanted(0)) {
        s.give(0, append(s.emit_at(0), OpKind::LogSoftmaxGrad, {s.g, s.y}, {AttrValue::integer("dim", s.lop.axis)},
                         s.grad_layout_of(0)));
      }
      break;
    case ops::OpKind::RmsNorm:
      if (s.wanted(0)) {
        std::vector<ir::ValueId> operands{s.g, s.in(0)};
        if (s.lop.inputs.size() > 1) operands.push_back(s.in(1));
        std::vector<AttrValue> attrs{AttrValue::real("eps", s.lop.attrs.real("eps"))};
        std::vector<ir::Layout> layouts{s.grad_layout_of(0)};
        s.give(0, append_multi(s.emit_at(0), OpKind::RmsNormGrad, operands, attrs, layouts).front());
      }
      if (s.lop.inputs.size() > 1 && s.wanted(1)) {
        s.give(1, append(s.emit_at(1), OpKind::RmsNormWeightGrad, {s.g, s.in(0)},
                         {AttrValue::real("eps", s.lop.attrs.real("eps"))}, s.grad_layout_of(1)));
      }
      break;
    case ops::OpKind::BatchNorm:
      if (s.wanted(0) || s.wanted(1) || s.wanted(2)) {
        // dgamma = Σ dy·x̂ and dbeta = Σ dy are partial where x is split
        // along a non-channel dim; dx needs them summed (SyncBN backward),
        // or, with local statistics, each batch shard's own sums.
        const bool local_stats = spec.train.batch_norm == BatchNormStatistics::Local;
        const std::vector<ir::ValueId>& stats = saved_extras(s.op, s.at.micro_batch);
        ir::Layout x_layout = input_layout(s.op, 0);
        const int rank = type_of(s.in(0)).rank;
        ir::Layout local = stats_layout(dual_layout(x_layout), rank, local_stats);
        const int64_t groups = local_stats ? batch_shards(*this, x_layout) : 1;
        std::vector<AttrValue> attrs{AttrValue::integer("count", batchnorm_count(*this, s.op) / groups),
                                     AttrValue::real("eps", s.lop.attrs.real("eps"))};
        Emit e = s.emit_at(s.wanted(0) ? 0 : 1);
        std::vector<ir::ValueId> operands{s.g, s.in(0), stats[0], stats[1]};
        std::vector<ir::Layout> layouts{local, local};
        std::vector<AttrValue> sums_attrs = attrs;
        if (groups > 1) sums_attrs.push_back(AttrValue::integer("groups", groups));
        std::vector<ir::ValueId> w = append_multi(e, OpKind::BatchNormWeightGrad, operands, sums_attrs, layouts);
        // The parameters' gradients sum every shard's sums.
        ir::Layout partial = stats_layout(dual_layout(x_layout), rank);
        auto parameter_grad = [&](ir::ValueId sums) {
          return groups > 1 ? sum_batch_shards(e, sums, local, partial) : sums;
        };
        if (s.wanted(1)) s.give(1, parameter_grad(w[0]));
        if (s.wanted(2)) s.give(2, parameter_grad(w[1]));
        if (s.wanted(0)) {
          Emit comm = e;
          comm.stream = ir::Stream::Feature;
          ir::Layout synced = synced_stats_layout(x_layout, local, local_stats);
          ir::ValueId dgamma = box(comm, w[0], local, synced);
          ir::ValueId dbeta = box(comm, w[1], local, synced);
          std::vector<ir::ValueId> dx_operands{s.g, s.in(0), stats[0], stats[1], s.in(1), dgamma, dbeta};
          std::vector<ir::Layout> dx_layout{s.grad_layout_of(0)};
          s.give(0, append_multi(e, OpKind::BatchNormInputGrad, dx_operands, attrs, dx_layout).front());
        }
      }
      break;
    case ops::OpKind::Softmax:
      if (s.wanted(0)) {
        s.give(0, append(s.emit_at(0), OpKind::SoftmaxGrad, {s.g, s.y}, {AttrValue::integer("dim", s.lop.axis)},
                         s.grad_layout_of(0)));
        if (s.lop.attrs.real("z_loss") > 0) s.give(0, z_loss_grad(s));
      }
      break;
    case ops::OpKind::LayerNorm:
      if (s.wanted(0)) {
        s.give(0, append(s.emit_at(0), OpKind::LayerNormGrad, {s.g, s.in(0), s.in(1)},
                         {AttrValue::real("eps", s.lop.attrs.real("eps"))}, s.grad_layout_of(0)));
      }
      if (s.wanted(1) || s.wanted(2)) {
        std::vector<ir::ValueId> operands{s.g, s.in(0)};
        std::vector<AttrValue> attrs{AttrValue::real("eps", s.lop.attrs.real("eps"))};
        std::vector<ir::Layout> layouts{s.grad_layout_of(1), s.grad_layout_of(2)};
        std::vector<ir::ValueId> r = append_multi(s.emit_at(1), OpKind::LayerNormWeightGrad, operands, attrs, layouts);
        if (s.wanted(1)) s.give(1, r[0]);
        if (s.wanted(2)) s.give(2, r[1]);
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
