// Lowering of each op of the .dstrat vocabulary beyond matmul and attention:
// tiny graphs compiled on 2-device meshes under the splits that matter,
// verified, with the collectives each split implies counted.
#include <gtest/gtest.h>

#include "compiler/compile_strategy.h"
#include "compiler/sbp/signature.h"
#include "ir/printer.h"
#include "ir/registry.h"
#include "ir/verifier.h"
#include "tests/unit/compiler/compile_and_verify.h"
#include "tests/unit/compiler/test_models.h"

namespace dstc::compiler {
namespace {

using testing::make_spec;
using testing::ModelBuilder;
using testing::S;
using testing::set_compute;
using testing::set_default;

constexpr AxisCompute kB{ir::Sbp::Broadcast, {}};
constexpr AxisCompute kP{ir::Sbp::PartialSum, {}};

// Adds an op whose output has the given dims (sizes written out, for ops
// whose output sizes differ from their inputs').
int32_t add_op(ModelBuilder& m, int32_t node, LogicalOp op, std::vector<Dim> out, const std::string& name = "y") {
  op.node = node;
  for (const Dim& d : out) op.output_dims.push_back(d.name);
  Tensor t{
      m.graph.nodes[node].path + "." + name, std::move(out), ir::DType::F32, TensorKind::Activation, -1, node, -1, {}};
  op.output = m.graph.add_tensor(t);
  m.graph.add_op(op);
  return op.output;
}

LogicalOp make(ops::OpKind type, std::vector<Operand> inputs) {
  LogicalOp op;
  op.type = type;
  op.attrs = ops::OpAttrs(ops::op_def(type));
  op.inputs = std::move(inputs);
  return op;
}

using testing::compile;
using testing::Compiled;

std::vector<const ir::Op*> ops_of(const Compiled& c, ir::OpKind kind, std::optional<ir::Phase> phase = {}) {
  std::vector<const ir::Op*> out;
  for (const ir::Op& op : c.f().ops)
    if (op.kind == kind && (!phase || op.phase == *phase)) out.push_back(&op);
  return out;
}

ir::TensorType operand_type(const Compiled& c, const ir::Op& op, size_t i = 0) {
  return c.module().value_type(c.f(), c.f().operands(op)[i]);
}

ir::Layout result_layout(const Compiled& c, const ir::Op& op, int i = 0) {
  return c.module().layout(c.f().values[c.f().result(op, i)].layout);
}

std::string string_attr(const Compiled& c, const ir::Op& op, std::string_view name) {
  return std::string(ir::AttrReader(c.module(), c.f(), op).string(name));
}

// images[b, c, h, w] -> conv (3x3, pad 1) -> batchnorm -> relu -> maxpool 2
// -> global average pool -> linear -> cross entropy.
struct ConvNet {
  LogicalGraph graph;
  int32_t conv = -1, bn = -1, pool = -1, gap = -1, fc = -1;
};

ConvNet make_convnet(int64_t batch, int64_t channels, int64_t out_channels, int64_t size, int64_t classes) {
  ModelBuilder m;
  ConvNet net;
  int32_t x = m.input("images", {{"b", batch}, {"c", channels}, {"h", size}, {"w", size}});
  int32_t labels = m.input("labels", {{"b", batch}}, ir::DType::I32, TensorKind::Input);
  m.graph.tensors[x].batch_axis = 0;
  m.graph.tensors[labels].batch_axis = 0;
  net.conv = m.node(0, "conv", "Conv2d");
  int32_t w = m.param(net.conv, "weight", {{"o", out_channels}, {"c", channels}, {"kh", 3}, {"kw", 3}});
  LogicalOp conv = make(ops::OpKind::Conv2d, {{x, {"b", "c", "h", "w"}}, {w, {"o", "c", "kh", "kw"}}});
  conv.attrs.set_integer("padding", 1);
  int32_t y = add_op(m, net.conv, conv, {{"b", batch}, {"o", out_channels}, {"h", size}, {"w", size}});
  net.bn = m.node(0, "bn", "BatchNorm");
  int32_t gamma = m.param(net.bn, "gamma", {{"o", out_channels}});
  int32_t beta = m.param(net.bn, "beta", {{"o", out_channels}});
  y = add_op(m, net.bn, make(ops::OpKind::BatchNorm, {{y, {"b", "o", "h", "w"}}, {gamma, {"o"}}, {beta, {"o"}}}),
             {{"b", batch}, {"o", out_channels}, {"h", size}, {"w", size}});
  int32_t act = m.node(0, "act", "ReLU");
  y = add_op(m, act, make(ops::OpKind::Relu, {{y, {"b", "o", "h", "w"}}}),
             {{"b", batch}, {"o", out_channels}, {"h", size}, {"w", size}});
  net.pool = m.node(0, "pool", "MaxPool");
  LogicalOp pool = make(ops::OpKind::MaxPool2d, {{y, {"b", "o", "h", "w"}}});
  pool.attrs.set_integer("kernel", 2);
  y = add_op(m, net.pool, pool, {{"b", batch}, {"o", out_channels}, {"h", size / 2}, {"w", size / 2}});
  net.gap = m.node(0, "gap", "GlobalAvgPool");
  LogicalOp gap = make(ops::OpKind::Mean, {{y, {"b", "o", "h", "w"}}});
  gap.axes = {2, 3};
  y = add_op(m, net.gap, gap, {{"b", batch}, {"o", out_channels}});
  net.fc = m.node(0, "fc", "Linear");
  int32_t wf = m.param(net.fc, "weight", {{"k", classes}, {"o", out_channels}});
  y = add_op(m, net.fc, make(ops::OpKind::Einsum, {{y, {"b", "o"}}, {wf, {"k", "o"}}}), {{"b", batch}, {"k", classes}});
  int32_t loss = m.node(0, "loss", "CrossEntropy");
  m.graph.loss = add_op(m, loss, make(ops::OpKind::CrossEntropy, {{y, {"b", "k"}}, {labels, {"b"}}}), {});
  m.graph.infer_batch_axes();
  net.graph = std::move(m.graph);
  return net;
}

TEST(OpsLowering, ConvNetDataParallelSyncsBatchNormStatistics) {
  ConvNet net = make_convnet(8, 4, 8, 8, 10);
  StrategySpec spec = make_spec(net.graph, {{"dp", 2}}, 8);
  set_default(spec, 0, S("b"));
  auto c = compile(net.graph, spec);
  ASSERT_TRUE(c->result);
  // Forward: the per-channel sum and sum of squares, all-reduced (SyncBN).
  auto forward = ops_of(*c, ir::OpKind::AllReduce, ir::Phase::Forward);
  ASSERT_EQ(forward.size(), 2u);
  for (const ir::Op* op : forward) EXPECT_EQ(operand_type(*c, *op), ir::TensorType(ir::DType::F32, {8}));
  // Backward: dgamma and dbeta summed for the input gradient.
  auto backward = ops_of(*c, ir::OpKind::AllReduce, ir::Phase::InputGrad);
  ASSERT_EQ(backward.size(), 2u);
  for (const ir::Op* op : backward) EXPECT_EQ(operand_type(*c, *op), ir::TensorType(ir::DType::F32, {8}));
  EXPECT_EQ(ops_of(*c, ir::OpKind::BatchNormApply).size(), 1u);
  EXPECT_EQ(ops_of(*c, ir::OpKind::BatchNormInputGrad).size(), 1u);
  EXPECT_EQ(ops_of(*c, ir::OpKind::Conv2dWeightGrad).size(), 1u);
  // The first op's input needs no gradient.
  EXPECT_TRUE(ops_of(*c, ir::OpKind::Conv2dInputGrad).empty());
  EXPECT_EQ(ops_of(*c, ir::OpKind::MaxPool2dGrad).size(), 1u);
  EXPECT_EQ(ops_of(*c, ir::OpKind::Expand).size(), 1u);
  // Statistics cover the whole micro-batch: 8 images of 8x8 per channel.
  const ir::Op* apply = ops_of(*c, ir::OpKind::BatchNormApply).front();
  EXPECT_EQ(ir::AttrReader(c->module(), c->f(), *apply).integer("count"), 8 * 8 * 8);
}

// batch_norm = local (DDP's BatchNorm): each rank's statistics are its own
// rows', kept apart (S(0) over dp), so nothing is all-reduced before the
// gradients; the parameters' gradients sum the ranks' sums (partial, then
// reduced with the other gradients).
TEST(OpsLowering, LocalBatchNormKeepsEachRanksStatistics) {
  ConvNet net = make_convnet(8, 4, 8, 8, 10);
  StrategySpec spec = make_spec(net.graph, {{"dp", 2}}, 8);
  set_default(spec, 0, S("b"));
  spec.train.batch_norm = BatchNormStatistics::Local;
  auto c = compile(net.graph, spec);
  ASSERT_TRUE(c->result);
  EXPECT_TRUE(ops_of(*c, ir::OpKind::AllReduce, ir::Phase::Forward).empty());
  EXPECT_TRUE(ops_of(*c, ir::OpKind::AllReduce, ir::Phase::InputGrad).empty());
  const ir::Op* stats = ops_of(*c, ir::OpKind::BatchNormStats).front();
  EXPECT_EQ(result_layout(*c, *stats), (ir::Layout{split(0)}));
  EXPECT_EQ(ir::AttrReader(c->module(), c->f(), *stats).integer("groups"), 2);
  // Each rank's 4 images of 8x8 per channel.
  const ir::Op* apply = ops_of(*c, ir::OpKind::BatchNormApply).front();
  EXPECT_EQ(ir::AttrReader(c->module(), c->f(), *apply).integer("count"), 4 * 8 * 8);
  // dgamma and dbeta: each rank's sums viewed as [1, channels], summed to
  // a partial gradient.
  int viewed_sums = 0;
  for (const ir::Op* view : ops_of(*c, ir::OpKind::Reshape)) {
    const ir::Op& def = c->f().ops[c->f().values[c->f().operands(*view)[0]].def];
    if (def.kind != ir::OpKind::BatchNormWeightGrad) continue;
    ++viewed_sums;
    EXPECT_EQ(result_layout(*c, *view), (ir::Layout{split(0)}));
  }
  EXPECT_EQ(viewed_sums, 2);
}

TEST(OpsLowering, BatchNormSplitByChannelKeepsStatisticsLocal) {
  ConvNet net = make_convnet(8, 4, 8, 8, 10);
  StrategySpec spec = make_spec(net.graph, {{"tp", 2}}, 8);
  for (int32_t n : {net.conv, net.bn, net.pool, net.gap}) set_compute(spec, n, 0, S("o"));
  auto c = compile(net.graph, spec);
  ASSERT_TRUE(c->result);
  for (const ir::Op* op : ops_of(*c, ir::OpKind::AllReduce, ir::Phase::Forward))
    EXPECT_NE(c->f().ops[c->f().values[c->f().operands(*op)[0]].def].kind, ir::OpKind::BatchNormStats);
  const ir::Op* stats = ops_of(*c, ir::OpKind::BatchNormStats).front();
  EXPECT_EQ(result_layout(*c, *stats), (ir::Layout{split(0)}));
}

TEST(OpsLowering, ConvSplitByInputChannelsIsPartialAndAllReduced) {
  ConvNet net = make_convnet(4, 4, 8, 8, 10);
  StrategySpec spec = make_spec(net.graph, {{"tp", 2}}, 4);
  set_compute(spec, net.conv, 0, S("c"));
  set_compute(spec, net.bn, 0, kB);
  auto c = compile(net.graph, spec);
  ASSERT_TRUE(c->result);
  const ir::Op* conv = ops_of(*c, ir::OpKind::Conv2d).front();
  EXPECT_EQ(result_layout(*c, *conv), (ir::Layout{kPartial}));
  EXPECT_EQ(operand_type(*c, *conv, 1), ir::TensorType(ir::DType::F32, {8, 2, 3, 3}));
  auto forward = ops_of(*c, ir::OpKind::AllReduce, ir::Phase::Forward);
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_EQ(operand_type(*c, *forward.front()), ir::TensorType(ir::DType::F32, {4, 8, 8, 8}));
  // The weight gradient is the local channel slice: no gradient all-reduce for it.
  const ir::Op* dw = ops_of(*c, ir::OpKind::Conv2dWeightGrad).front();
  EXPECT_EQ(result_layout(*c, *dw), (ir::Layout{split(1)}));
}

TEST(OpsSignatures, ConvPoolAndConcatRefuseTheirWindowedOrJoinedDims) {
  ConvNet net = make_convnet(4, 4, 8, 8, 10);
  const LogicalOp& conv = net.graph.ops[net.graph.nodes[net.conv].ops[0]];
  std::string why;
  EXPECT_FALSE(signature_for(net.graph, conv, S("h"), why));
  EXPECT_NE(why.find("window"), std::string::npos) << why;
  EXPECT_FALSE(signature_for(net.graph, conv, S("kh"), why));
  auto by_o = signature_for(net.graph, conv, S("o"), why);
  ASSERT_TRUE(by_o);
  EXPECT_EQ(by_o->inputs, (std::vector<ir::Sbp>{kBroadcast, split(0)}));
  EXPECT_EQ(by_o->output, split(1));
  auto partial = signature_for(net.graph, conv, kP, why);
  ASSERT_TRUE(partial);
  EXPECT_EQ(partial->inputs, (std::vector<ir::Sbp>{kPartial, kBroadcast}));
  const LogicalOp& pool = net.graph.ops[net.graph.nodes[net.pool].ops[0]];
  EXPECT_FALSE(signature_for(net.graph, pool, S("w"), why));
  EXPECT_FALSE(signature_for(net.graph, pool, kP, why)) << "max pooling is not linear";
  EXPECT_TRUE(signature_for(net.graph, pool, S("o"), why));
  const LogicalOp& gap = net.graph.ops[net.graph.nodes[net.gap].ops[0]];
  auto reduced = signature_for(net.graph, gap, S("h"), why);
  ASSERT_TRUE(reduced);
  EXPECT_EQ(reduced->output, kPartial);
}

// x[b, h] -> linear (w[k, h]) -> y[b, k] -> reduce over k -> [b] -> mse vs target[b].
struct Reduction {
  LogicalGraph graph;
  int32_t fc = -1, reduce = -1, loss = -1;
};

Reduction make_reduction(ops::OpKind type, int64_t batch, int64_t hidden, int64_t k) {
  ModelBuilder m;
  Reduction r;
  int32_t x = m.input("x", {{"b", batch}, {"h", hidden}});
  int32_t target = m.input("target", {{"b", batch}}, ir::DType::F32, TensorKind::Input);
  m.graph.tensors[x].batch_axis = 0;
  m.graph.tensors[target].batch_axis = 0;
  r.fc = m.node(0, "fc", "Linear");
  int32_t w = m.param(r.fc, "weight", {{"k", k}, {"h", hidden}});
  int32_t y = add_op(m, r.fc, make(ops::OpKind::Einsum, {{x, {"b", "h"}}, {w, {"k", "h"}}}), {{"b", batch}, {"k", k}});
  r.reduce = m.node(0, "reduce", "Reduce");
  LogicalOp reduce = make(type, {{y, {"b", "k"}}});
  reduce.axes = {1};
  y = add_op(m, r.reduce, reduce, {{"b", batch}});
  r.loss = m.node(0, "loss", "MSELoss");
  m.graph.loss = add_op(m, r.loss, make(ops::OpKind::MseLoss, {{y, {"b"}}, {target, {"b"}}}), {});
  m.graph.infer_batch_axes();
  r.graph = std::move(m.graph);
  return r;
}

TEST(OpsLowering, MaxOverASplitDimIsPartialMaxAllReducedWithMax) {
  Reduction r = make_reduction(ops::OpKind::Max, 4, 8, 6);
  StrategySpec spec = make_spec(r.graph, {{"tp", 2}}, 4);
  set_compute(spec, r.fc, 0, S("k"));
  set_compute(spec, r.reduce, 0, S("k"));
  set_compute(spec, r.loss, 0, kB);
  auto c = compile(r.graph, spec);
  ASSERT_TRUE(c->result);
  const ir::Op* max = ops_of(*c, ir::OpKind::ReduceMax).front();
  EXPECT_EQ(result_layout(*c, *max), (ir::Layout{{ir::Sbp::PartialMax, 0}}));
  auto reduces = ops_of(*c, ir::OpKind::AllReduce, ir::Phase::Forward);
  ASSERT_EQ(reduces.size(), 1u);
  EXPECT_EQ(string_attr(*c, *reduces.front(), "op"), "max");
  // The backward compares each part with the global maximum the forward
  // already reduced: dx stays split like x, no second max all-reduce.
  const ir::Op* grad = ops_of(*c, ir::OpKind::ReduceMaxGrad).front();
  EXPECT_EQ(result_layout(*c, *grad), (ir::Layout{split(1)}));
  for (const ir::Op* op : ops_of(*c, ir::OpKind::AllReduce, ir::Phase::InputGrad))
    EXPECT_EQ(string_attr(*c, *op, "op"), "sum");
}

TEST(OpsLowering, SumOverASplitDimIsPartialSum) {
  for (ops::OpKind type : {ops::OpKind::Sum, ops::OpKind::Mean}) {
    Reduction r = make_reduction(type, 4, 8, 6);
    StrategySpec spec = make_spec(r.graph, {{"tp", 2}}, 4);
    set_compute(spec, r.fc, 0, S("k"));
    set_compute(spec, r.reduce, 0, S("k"));
    set_compute(spec, r.loss, 0, kB);
    auto c = compile(r.graph, spec);
    ASSERT_TRUE(c->result);
    auto reduces = ops_of(*c, ir::OpKind::AllReduce, ir::Phase::Forward);
    ASSERT_EQ(reduces.size(), 1u);
    EXPECT_EQ(string_attr(*c, *reduces.front(), "op"), "sum");
    EXPECT_EQ(ops_of(*c, ir::OpKind::Expand).size(), 1u);
  }
}

TEST(OpsLowering, MseLossIsASumOverTheGlobalBatch) {
  Reduction r = make_reduction(ops::OpKind::Sum, 8, 8, 6);
  StrategySpec spec = make_spec(r.graph, {{"dp", 2}}, 8, 2);
  set_default(spec, 0, S("b"));
  auto c = compile(r.graph, spec);
  ASSERT_TRUE(c->result);
  // Each of 2 micro-batches on each of 2 devices sums its squares and scales
  // by 1 / 8 (the global batch), so the parts add up to the mean.
  int scaled = 0;
  for (const ir::Op* op : ops_of(*c, ir::OpKind::Scale, ir::Phase::Forward)) {
    EXPECT_DOUBLE_EQ(ir::AttrReader(c->module(), c->f(), *op).real("factor"), 1.0 / 8);
    ++scaled;
  }
  EXPECT_EQ(scaled, 2);
  EXPECT_TRUE(ops_of(*c, ir::OpKind::AllReduce, ir::Phase::Forward).empty());
}

// Every elementwise and normalizing op in a chain: x -> tanh -> sigmoid ->
// exp -> sqrt -> scale -> sub(., bias) -> div(., bias) -> maximum(., bias)
// -> rmsnorm(gamma) -> log_softmax -> concat with itself -> mean -> mse.
LogicalGraph make_chain(int64_t batch, int64_t hidden) {
  ModelBuilder m;
  int32_t x = m.input("x", {{"b", batch}, {"h", hidden}});
  int32_t target = m.input("target", {{"b", batch}, {"h", 2 * hidden}}, ir::DType::F32, TensorKind::Input);
  m.graph.tensors[x].batch_axis = 0;
  m.graph.tensors[target].batch_axis = 0;
  int32_t layer = m.node(0, "layer", "Chain");
  int32_t w = m.param(layer, "weight", {{"o", hidden}, {"h", hidden}});
  int32_t bias = m.param(layer, "bias", {{"o", hidden}});
  int32_t gamma = m.param(layer, "gamma", {{"o", hidden}});
  std::vector<Dim> bh{{"b", batch}, {"o", hidden}};
  int32_t y = add_op(m, layer, make(ops::OpKind::Einsum, {{x, {"b", "h"}}, {w, {"o", "h"}}}), bh);
  for (ops::OpKind t : {ops::OpKind::Tanh, ops::OpKind::Sigmoid, ops::OpKind::Exp, ops::OpKind::Sqrt})
    y = add_op(m, layer, make(t, {{y, {"b", "o"}}}), bh);
  LogicalOp scale = make(ops::OpKind::Scale, {{y, {"b", "o"}}});
  scale.attrs.set_real("by", 3);
  y = add_op(m, layer, scale, bh);
  for (ops::OpKind t : {ops::OpKind::Sub, ops::OpKind::Div, ops::OpKind::Maximum})
    y = add_op(m, layer, make(t, {{y, {"b", "o"}}, {bias, {"o"}}}), bh);
  y = add_op(m, layer, make(ops::OpKind::RmsNorm, {{y, {"b", "o"}}, {gamma, {"o"}}}), bh);
  LogicalOp lsm = make(ops::OpKind::LogSoftmax, {{y, {"b", "o"}}});
  lsm.axis = 1;
  y = add_op(m, layer, lsm, bh);
  LogicalOp cat = make(ops::OpKind::Concat, {{y, {"b", "o"}}, {y, {"b", "o"}}});
  cat.axis = 1;
  y = add_op(m, layer, cat, {{"b", batch}, {"o", 2 * hidden}});
  int32_t loss = m.node(0, "loss", "MSELoss");
  m.graph.loss = add_op(m, loss, make(ops::OpKind::MseLoss, {{y, {"b", "o"}}, {target, {"b", "o"}}}), {});
  m.graph.infer_batch_axes();
  return std::move(m.graph);
}

TEST(OpsLowering, EveryElementwiseOpLowersForwardAndBackward) {
  LogicalGraph g = make_chain(4, 8);
  StrategySpec spec = make_spec(g, {{"dp", 2}}, 4);
  set_default(spec, 0, S("b"));
  auto c = compile(g, spec);
  ASSERT_TRUE(c->result);
  for (ir::OpKind k : {ir::OpKind::Tanh, ir::OpKind::Sigmoid, ir::OpKind::Exp, ir::OpKind::Sqrt, ir::OpKind::Div,
                       ir::OpKind::Maximum, ir::OpKind::RmsNorm, ir::OpKind::LogSoftmax, ir::OpKind::Concat})
    EXPECT_EQ(ops_of(*c, k, ir::Phase::Forward).size(), 1u) << ir::op_name(k);
  for (ir::OpKind k : {ir::OpKind::TanhGrad, ir::OpKind::SigmoidGrad, ir::OpKind::MaximumGrad, ir::OpKind::RmsNormGrad,
                       ir::OpKind::RmsNormWeightGrad, ir::OpKind::LogSoftmaxGrad})
    EXPECT_EQ(ops_of(*c, k).size(), 1u) << ir::op_name(k);
  // The concat's gradient is two slices; the bias gradients sum over the batch.
  EXPECT_EQ(ops_of(*c, ir::OpKind::Slice, ir::Phase::InputGrad).size(), 2u);
  EXPECT_EQ(ops_of(*c, ir::OpKind::Sum, ir::Phase::WeightGrad).size(), 3u);
  // Data parallel: only the parameter gradients are reduced.
  for (const ir::Op* op : ops_of(*c, ir::OpKind::AllReduce)) EXPECT_EQ(op->phase, ir::Phase::WeightGrad);
}

TEST(OpsLowering, ElementwiseChainUnderTensorSplitOfTheFeatures) {
  LogicalGraph g = make_chain(4, 8);
  StrategySpec spec = make_spec(g, {{"tp", 2}}, 4);
  set_default(spec, 0, S("o"));
  auto c = compile(g, spec);
  ASSERT_TRUE(c->result);
  // rmsnorm and log_softmax normalize over o: the split is gathered first.
  EXPECT_FALSE(ops_of(*c, ir::OpKind::AllGather, ir::Phase::Forward).empty());
}

}  // namespace
}  // namespace dstc::compiler
