// Losses: summed, then scaled by the global number of labels; gradients
// scaled alike.
// One family's rules; autodiff.cpp picks the family from the op table.
#include <array>

#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

Lowering::VocabShards Lowering::vocab_shards(int32_t op) const {
  VocabShards v;
  const ir::Layout& x = input_layout(op, 0);
  const int last = static_cast<int>(graph.tensors[graph.ops[op].inputs[0].tensor].dims.size()) - 1;
  v.rows = v.maxima = v.sums = x;
  for (size_t a = 0; a < x.size(); ++a) {
    if (x[a].kind != ir::Sbp::Split || x[a].dim != last) continue;
    v.split = true;
    v.axes.push_back(a);
    v.rows[a] = kBroadcast;
    v.maxima[a] = {ir::Sbp::PartialMax, 0};
    v.sums[a] = kPartial;
  }
  return v;
}

ir::ValueId Lowering::forward_loss(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::MseLoss: {
      // Summed squared difference (in f32), then 1/N over the global batch.
      ir::Layout x_layout = input_layout(f.op, 0);
      ir::ValueId diff = append(f.at, OpKind::Sub, {f.in[0], f.in[1]}, {}, x_layout);
      ir::ValueId squared = append(f.at, OpKind::Mul, {diff, diff}, {}, x_layout);
      if (type_of(squared).dtype != ir::DType::F32)
        squared = append(f.at, OpKind::Cast, {squared}, {AttrValue::string("dtype", "f32")}, x_layout);
      std::vector<int64_t> all;
      for (int d = 0; d < type_of(squared).rank; ++d) all.push_back(d);
      ir::ValueId sum = append(f.at, OpKind::Sum, {squared}, {AttrValue::ints("dims", all)}, f.out);
      return append(f.at, OpKind::Scale, {sum}, {AttrValue::real("factor", 1.0 / loss_normalizer(graph, f.lop))},
                    f.out);
    }
    case ops::OpKind::CrossEntropy: {
      // In fp32 whatever the logits' precision, as Megatron-LM, DeepSpeed and
      // torchtitan compute the loss: the logits are upcast, and that copy is
      // what the backward reads (the low-precision logits die here).
      ir::ValueId logits = f.in[0];
      if (type_of(logits).dtype != ir::DType::F32) {
        logits = append(f.at, OpKind::Cast, {logits}, {AttrValue::string("dtype", "f32")}, input_layout(f.op, 0));
        save_extras(f.op, f.at.micro_batch, {logits});
      }
      if (VocabShards v = vocab_shards(f.op); v.split) {
        // Megatron-LM's vocab_parallel_cross_entropy: each shard's row
        // maxima, all-reduced (max); each shard's sum of exp(x - max) and
        // its label's logit, all-reduced (sum) together; the loss from
        // those. The logits are never gathered.
        Emit boxing = f.at;
        boxing.stream = ir::Stream::Feature;
        const std::array<int64_t, 1> last{type_of(logits).rank - 1};
        ir::ValueId local = append(f.at, OpKind::ReduceMax, {logits}, {AttrValue::ints("dims", last)}, v.maxima);
        ir::ValueId max = box(boxing, local, v.maxima, v.rows);
        std::vector<ir::ValueId> parts = append_multi(
            f.at, OpKind::CrossEntropyParts, std::vector{logits, max, f.in[1]}, {}, std::vector{v.sums, v.sums});
        std::vector<ir::ValueId> whole = box_group(boxing, parts, v.sums, v.rows);
        save_extras(f.op, f.at.micro_batch, {logits, max, whole[0]});
        ir::ValueId sum = append(f.at, OpKind::CrossEntropyTotal, {whole[0], whole[1]}, {}, f.out);
        return append(f.at, OpKind::Scale, {sum}, {AttrValue::real("factor", 1.0 / loss_normalizer(graph, f.lop))},
                      f.out);
      }
      ir::ValueId sum =
          append(f.at, OpKind::CrossEntropy, {logits, f.in[1]}, {AttrValue::string("reduction", "sum")}, f.out);
      return append(f.at, OpKind::Scale, {sum}, {AttrValue::real("factor", 1.0 / loss_normalizer(graph, f.lop))},
                    f.out);
    }
    default: no_forward_lowering(f.lop);
  }
}

void Lowering::backward_loss(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::MseLoss:
      if (s.wanted(0) || s.wanted(1)) {
        // d/dprediction of Σ(p - t)² / N is 2 (p - t) g / N.
        Emit e = s.emit_at(s.wanted(0) ? 0 : 1);
        ir::Layout x_layout = input_layout(s.op, 0);
        ir::ValueId diff = append(e, OpKind::Sub, {s.in(0), s.in(1)}, {}, x_layout);
        ir::ValueId scaled = append(e, OpKind::Scale, {s.g},
                                    {AttrValue::real("factor", 2.0 / loss_normalizer(graph, s.lop))}, s.g_layout);
        if (type_of(scaled).dtype != type_of(diff).dtype) {
          scaled = append(e, OpKind::Cast, {scaled}, {AttrValue::string("dtype", ir::dtype_name(type_of(diff).dtype))},
                          s.g_layout);
        }
        ir::ValueId dpred = append(e, OpKind::Mul, {diff, scaled}, {}, s.grad_layout_of(0));
        if (s.wanted(0)) s.give(0, dpred);
        if (s.wanted(1))
          s.give(1,
                 append(s.emit_at(1), OpKind::Scale, {dpred}, {AttrValue::real("factor", -1.0)}, s.grad_layout_of(1)));
      }
      break;
    case ops::OpKind::CrossEntropy:
      if (s.wanted(0)) {
        Emit e = s.emit_at(0);
        ir::ValueId scaled =
            append(e, OpKind::Scale, {s.g}, {AttrValue::real("factor", 1.0 / loss_normalizer(graph, s.lop))},
                   dual_layout(output_layout(s.op)));
        ir::DType precision = type_of(s.in(0)).dtype;
        ir::ValueId grad;
        if (VocabShards v = vocab_shards(s.op); v.split) {
          // Every shard needs the whole incoming gradient (the loss's is
          // partial where the loss is replicated).
          const std::vector<ir::ValueId>& saved = saved_extras(s.op, s.at.micro_batch);
          ir::ValueId logits = saved[saved.size() - 3], max = saved[saved.size() - 2], sums = saved.back();
          ir::Layout whole = dual_layout(output_layout(s.op));
          for (size_t a : v.axes) whole[a] = kBroadcast;
          Emit boxing = e;
          boxing.stream = ir::Stream::Feature;
          scaled = box(boxing, scaled, dual_layout(output_layout(s.op)), whole);
          grad =
              append(e, OpKind::CrossEntropyPartsGrad, {scaled, logits, max, sums, s.in(1)}, {}, s.grad_layout_of(0));
        } else {
          ir::ValueId logits = precision == ir::DType::F32 ? s.in(0) : saved_extras(s.op, s.at.micro_batch).front();
          grad = append(e, OpKind::CrossEntropyGrad, {scaled, logits, s.in(1)}, {AttrValue::string("reduction", "sum")},
                        s.grad_layout_of(0));
        }
        if (precision != ir::DType::F32) {
          grad = append(e, OpKind::Cast, {grad}, {AttrValue::string("dtype", ir::dtype_name(precision))},
                        s.grad_layout_of(0));
        }
        s.give(0, grad);
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
