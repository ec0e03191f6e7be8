// A synthetic GPT-like training step in the explicit-schedule IR, built
// with ir::Builder, for the simulator's tests and benchmarks: a mesh
// world[pp, dp, tp], `layers` blocks split evenly over the pp stages, each
// block two Megatron pairs (column- then row-parallel matmuls, the
// activation between, an all-reduce over tp, a residual add), a GPipe
// schedule over `micro` micro-batches with send/recv between stages, the
// weight gradients all-reduced over dp on the gradient stream, and an SGD
// step. Every op of a stage runs on the stage's whole slice, so all tp/dp
// ranks of a stage run the same program.
#pragma once

#include <string>
#include <vector>

#include "ir/module.h"

namespace dstc::htae::testing {

struct GptShape {
  int pp = 2, dp = 2, tp = 2;
  int layers = 4;
  int micro = 4;
  int64_t tokens = 2048;  // per micro-batch and dp rank (batch x sequence)
  int64_t hidden = 1024;
};

inline ir::Module synthetic_gpt(const GptShape& g) {
  using namespace ir;
  Module m;
  m.set_mesh(Mesh("world", {{"pp", g.pp}, {"dp", g.dp}, {"tp", g.tp}}));
  Function& f = m.add_function("train_step");
  Builder b(m, f);
  const int64_t h = g.hidden, ff = 4 * g.hidden / g.tp, tok = g.tokens;
  const TensorType act(DType::BF16, {tok, h});
  std::vector<DeviceSetId> stage;
  for (int s = 0; s < g.pp; ++s) {
    stage.push_back(m.intern_devices(DeviceSet{{{s, s + 1}, {0, g.dp}, {0, g.tp}}, {}}));
  }
  const int per_stage = g.layers / g.pp;
  // Per stage and layer: two (column, row) weight pairs.
  struct Pair {
    ValueId w1, w2;
  };
  std::vector<std::vector<Pair>> weights(static_cast<size_t>(g.pp));
  for (int s = 0; s < g.pp; ++s) {
    for (int l = 0; l < 2 * per_stage; ++l) {
      ValueId w1 = b.add_arg("", ArgKind::Param, TensorType(DType::BF16, {h, ff}), stage[s]);
      ValueId w2 = b.add_arg("", ArgKind::Param, TensorType(DType::BF16, {ff, h}), stage[s]);
      weights[static_cast<size_t>(s)].push_back({w1, w2});
    }
  }
  uint32_t channel = 0;
  auto op = [&](OpKind kind, DeviceSetId set, std::vector<ValueId> operands, OpMeta meta,
                std::vector<AttrValue> attrs = {}) {
    OpSpec spec;
    spec.kind = kind;
    spec.devices = set;
    spec.operands = operands;
    spec.attrs = attrs;
    spec.meta = meta;
    return b.append_value(spec);
  };
  auto all_reduce = [&](ValueId v, DeviceSetId set, int axis, Stream stream, OpMeta meta) {
    OpSpec spec;
    spec.kind = OpKind::AllReduce;
    spec.devices = set;
    std::vector<ValueId> operands = {v};
    spec.operands = operands;
    meta.stream = stream;
    spec.meta = meta;
    spec.group_axes = static_cast<uint16_t>(1u << axis);
    return b.append_value(spec);
  };
  // Moves v from stage `from` to stage `to`; returns the received value.
  auto transfer = [&](ValueId v, int from, int to, OpMeta meta) {
    ++channel;
    OpSpec send;
    send.kind = OpKind::Send;
    send.devices = stage[from];
    std::vector<ValueId> operands = {v};
    send.operands = operands;
    send.meta = meta;
    send.meta.stream = Stream::Feature;
    send.peer = stage[to];
    send.channel = channel;
    b.append(send);
    OpSpec recv;
    recv.kind = OpKind::Recv;
    recv.devices = stage[to];
    recv.meta = meta;
    recv.meta.stream = Stream::Feature;
    recv.meta.stage = static_cast<int16_t>(to);
    recv.peer = stage[from];
    recv.channel = channel;
    std::vector<TypeId> types = {f.values[v].type};
    recv.result_types = types;
    return b.append_value(recv);
  };
  const std::vector<AttrValue> tb = {AttrValue::boolean("transpose_b", true)};
  const std::vector<AttrValue> ta = {AttrValue::boolean("transpose_a", true)};
  // Saved activations per (micro-batch, stage, pair): block input, pre-activation, activation.
  struct Saved {
    ValueId x, pre, a;
  };
  std::vector<std::vector<std::vector<Saved>>> saved(static_cast<size_t>(g.micro),
                                                     std::vector<std::vector<Saved>>(static_cast<size_t>(g.pp)));
  std::vector<std::vector<ValueId>> grads(static_cast<size_t>(g.pp));  // dw1, dw2 per pair, accumulated
  std::vector<ValueId> inputs;
  for (int mb = 0; mb < g.micro; ++mb) {
    inputs.push_back(b.add_arg("", ArgKind::Input, act, stage[0]));
  }
  for (int mb = 0; mb < g.micro; ++mb) {
    ValueId x = inputs[static_cast<size_t>(mb)];
    for (int s = 0; s < g.pp; ++s) {
      OpMeta meta{Stream::Compute, Phase::Forward, static_cast<int16_t>(s), mb, kNoLoc};
      if (s > 0) x = transfer(x, s - 1, s, meta);
      for (const Pair& p : weights[static_cast<size_t>(s)]) {
        ValueId pre = op(OpKind::Matmul, stage[s], {x, p.w1}, meta);
        ValueId a = op(OpKind::Gelu, stage[s], {pre}, meta);
        ValueId part = op(OpKind::Matmul, stage[s], {a, p.w2}, meta);
        ValueId y = all_reduce(part, stage[s], 2, Stream::Feature, meta);
        saved[static_cast<size_t>(mb)][static_cast<size_t>(s)].push_back({x, pre, a});
        x = op(OpKind::Add, stage[s], {x, y}, meta);
      }
    }
  }
  for (int mb = 0; mb < g.micro; ++mb) {
    ValueId dx = kNone;
    for (int s = g.pp - 1; s >= 0; --s) {
      OpMeta ig{Stream::Compute, Phase::InputGrad, static_cast<int16_t>(s), mb, kNoLoc};
      OpMeta wg{Stream::Compute, Phase::WeightGrad, static_cast<int16_t>(s), mb, kNoLoc};
      const auto& pairs = weights[static_cast<size_t>(s)];
      auto& stage_saved = saved[static_cast<size_t>(mb)][static_cast<size_t>(s)];
      if (dx == kNone) {
        dx = op(OpKind::Gelu, stage[s], {stage_saved.back().x}, ig);  // the loss gradient's stand-in
      } else {
        dx = transfer(dx, s + 1, s, ig);
      }
      std::vector<ValueId>& acc = grads[static_cast<size_t>(s)];
      for (size_t i = pairs.size(); i-- > 0;) {
        const Saved& sv = stage_saved[i];
        ValueId da = op(OpKind::Matmul, stage[s], {dx, pairs[i].w2}, ig, tb);
        ValueId dw2 = op(OpKind::Matmul, stage[s], {sv.a, dx}, wg, ta);
        ValueId dpre = op(OpKind::GeluGrad, stage[s], {da, sv.pre}, ig);
        ValueId dxp = op(OpKind::Matmul, stage[s], {dpre, pairs[i].w1}, ig, tb);
        ValueId dw1 = op(OpKind::Matmul, stage[s], {sv.x, dpre}, wg, ta);
        ValueId dxr = all_reduce(dxp, stage[s], 2, Stream::Feature, ig);
        dx = op(OpKind::Add, stage[s], {dx, dxr}, ig);
        if (acc.size() < 2 * pairs.size()) acc.resize(2 * pairs.size(), kNone);
        for (auto [slot, grad] : {std::pair{2 * i, dw1}, std::pair{2 * i + 1, dw2}}) {
          acc[slot] = acc[slot] == kNone ? grad : op(OpKind::Accumulate, stage[s], {acc[slot], grad}, wg);
        }
      }
    }
  }
  std::vector<ValueId> returns;
  for (int s = 0; s < g.pp; ++s) {
    OpMeta opt{Stream::Compute, Phase::Optimizer, static_cast<int16_t>(s), -1, kNoLoc};
    const auto& pairs = weights[static_cast<size_t>(s)];
    for (size_t i = 0; i < pairs.size(); ++i) {
      for (int k = 0; k < 2; ++k) {
        ValueId grad = all_reduce(grads[static_cast<size_t>(s)][2 * i + static_cast<size_t>(k)], stage[s], 1,
                                  Stream::Grad, {Stream::Grad, Phase::WeightGrad, static_cast<int16_t>(s), -1, kNoLoc});
        ValueId w = k == 0 ? pairs[i].w1 : pairs[i].w2;
        returns.push_back(op(OpKind::Sgd, stage[s], {w, grad}, opt, {AttrValue::real("lr", 0.01)}));
      }
    }
  }
  b.set_returns(returns);
  return m;
}

}  // namespace dstc::htae::testing
