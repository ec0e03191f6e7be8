// The compiler's lowering, checked against what the papers say the
// strategies must communicate.
#include <gtest/gtest.h>

#include <map>

#include "compiler/compile_strategy.h"
#include "ir/printer.h"
#include "ir/registry.h"
#include "ir/replica_names.h"
#include "ir/verifier.h"
#include "tests/unit/compiler/compile_and_verify.h"
#include "tests/unit/compiler/test_models.h"

namespace dstc::compiler {
namespace {

using testing::Gpt;
using testing::make_gpt;
using testing::make_mlp;
using testing::make_spec;
using testing::S;
using testing::set_compute;
using testing::set_default;

using testing::compile;
using testing::Compiled;

// Ops of a kind on a mesh axis in a phase (any phase when nullopt).
struct OpFilter {
  ir::OpKind kind;
  int axis = -1;
  std::optional<ir::Phase> phase = {};
};

std::vector<const ir::Op*> select(const ir::Module& m, const OpFilter& f) {
  std::vector<const ir::Op*> ops;
  for (const ir::Op& op : m.functions[0].ops) {
    if (op.kind != f.kind) continue;
    if (f.axis >= 0 && op.group_axes != (1u << f.axis)) continue;
    if (f.phase && op.phase != *f.phase) continue;
    ops.push_back(&op);
  }
  return ops;
}

// Logical bytes a collective's operand stands for, over its group.
// All operands' (results') bytes: a grouped collective moves them all.
double operand_bytes(const ir::Module& m, const ir::Op& op) {
  const ir::Function& f = m.functions[0];
  double bytes = 0;
  for (ir::ValueId v : f.operands(op)) bytes += static_cast<double>(m.value_type(f, v).bytes());
  return bytes;
}
double result_bytes(const ir::Module& m, const ir::Op& op) {
  const ir::Function& f = m.functions[0];
  double bytes = 0;
  for (int i = 0; i < op.result_count; ++i) bytes += static_cast<double>(m.value_type(f, f.result(op, i)).bytes());
  return bytes;
}

double param_bytes(const LogicalGraph& g) {
  double total = 0;
  for (const Tensor& t : g.tensors)
    if (t.kind == TensorKind::Param) total += static_cast<double>(t.numel()) * 4;
  return total;
}

TEST(Lowering, SingleDeviceHasNoCommunication) {
  auto mlp = make_mlp(2, 8, 16, 4);
  auto c = compile(mlp.graph, make_spec(mlp.graph, {{"dp", 1}}, 8));
  for (const ir::Op& op : c->result->module.functions[0].ops) EXPECT_FALSE(ir::op_info(op.kind).is_communication());
  // forward: 2 layers (einsum, relu) + head + loss (cross_entropy, scale)
  EXPECT_EQ(select(c->result->module, {ir::OpKind::Einsum, -1, ir::Phase::Forward}).size(), 3u);
  EXPECT_EQ(select(c->result->module, {ir::OpKind::Adam}).size(), 3u);
}

TEST(Lowering, DataParallelAllReducesExactlyTheParameterBytes) {
  auto mlp = make_mlp(3, 32, 64, 8);
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 4}}, 32, 2);
  set_default(spec, 0, S("b"));
  auto c = compile(mlp.graph, spec);
  const ir::Module& m = c->result->module;
  double reduced = 0;
  for (const ir::Op* op : select(m, {ir::OpKind::AllReduce, 0})) {
    EXPECT_EQ(op->phase, ir::Phase::WeightGrad);
    EXPECT_EQ(op->stream, ir::Stream::Grad);
    reduced += operand_bytes(m, *op);
  }
  EXPECT_DOUBLE_EQ(reduced, param_bytes(mlp.graph));
  // Gradients accumulate over the two micro-batches before they are reduced.
  EXPECT_EQ(select(m, {ir::OpKind::Accumulate}).size(), 4u);
}

TEST(Lowering, ABufferIsStoredButGetsNoGradientReductionOrOptimizerState) {
  // A parameter declared `buffer` (a rotary table, a mask): read as a
  // weight, but nothing flows back into it, so the data-parallel step
  // reduces only the trainable weights and updates only them.
  auto mlp = make_mlp(3, 32, 64, 8);
  auto param = std::find_if(mlp.graph.tensors.begin(), mlp.graph.tensors.end(),
                            [](const Tensor& t) { return t.kind == TensorKind::Param; });
  ASSERT_NE(param, mlp.graph.tensors.end());
  Tensor& frozen = *param;
  frozen.trainable = false;
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 4}}, 32, 2);
  set_default(spec, 0, S("b"));
  auto c = compile(mlp.graph, spec);
  const ir::Module& m = c->result->module;
  double reduced = 0;
  for (const ir::Op* op : select(m, {ir::OpKind::AllReduce, 0})) reduced += operand_bytes(m, *op);
  EXPECT_DOUBLE_EQ(reduced, param_bytes(mlp.graph) - static_cast<double>(frozen.numel()) * 4);
  const auto params = std::count_if(mlp.graph.tensors.begin(), mlp.graph.tensors.end(),
                                    [](const Tensor& t) { return t.kind == TensorKind::Param; });
  EXPECT_EQ(select(m, {ir::OpKind::Adam}).size(), static_cast<size_t>(params - 1));
  std::vector<std::string> stored;
  for (const ir::Arg& a : c->f().args) {
    std::string name(m.value_name(c->f(), a.value));
    if (name.rfind(frozen.name, 0) == 0) stored.push_back(name + (a.kind == ir::ArgKind::Param ? " param" : " other"));
  }
  EXPECT_EQ(stored, std::vector<std::string>{frozen.name + " param"});
}

StrategySpec megatron(const Gpt& gpt, int dp, int tp, int64_t batch, int32_t micro = 1) {
  StrategySpec spec = make_spec(gpt.graph, {{"dp", dp}, {"tp", tp}}, batch, micro);
  set_default(spec, 0, S("b"));
  for (const Gpt::Block& b : gpt.blocks) {
    for (int32_t n : {b.q, b.k, b.v, b.attn, b.proj}) set_compute(spec, n, 1, S("n"));
    for (int32_t n : {b.fc1, b.act, b.fc2}) set_compute(spec, n, 1, S("f"));
  }
  return spec;
}

TEST(Lowering, MegatronHasTwoAllReducesPerLayerEachWayOfActivationSize) {
  const int layers = 3, tp = 4, dp = 2;
  const int64_t batch = 8, seq = 16, hidden = 32;
  Gpt gpt = make_gpt(layers, batch, seq, hidden, 8, 64);
  auto c = compile(gpt.graph, megatron(gpt, dp, tp, batch));
  const ir::Module& m = c->result->module;
  double activation = double(batch / dp) * seq * hidden * 4;
  auto forward = select(m, {ir::OpKind::AllReduce, 1, ir::Phase::Forward});
  auto backward = select(m, {ir::OpKind::AllReduce, 1, ir::Phase::InputGrad});
  EXPECT_EQ(forward.size(), size_t(2 * layers));
  EXPECT_EQ(backward.size(), size_t(2 * layers));
  for (const ir::Op* op : forward) EXPECT_DOUBLE_EQ(operand_bytes(m, *op), activation);
  for (const ir::Op* op : backward) EXPECT_DOUBLE_EQ(operand_bytes(m, *op), activation);
  EXPECT_TRUE(select(m, {ir::OpKind::AllGather, 1}).empty());
}

TEST(Lowering, MegatronWithOneTensorRankHasNoTensorCollectives) {
  Gpt gpt = make_gpt(2, 8, 16, 32, 8, 64);
  auto c = compile(gpt.graph, megatron(gpt, 2, 1, 8));
  for (ir::OpKind k : {ir::OpKind::AllReduce, ir::OpKind::AllGather, ir::OpKind::ReduceScatter}) {
    auto ops = select(c->result->module, {k, 1});
    for (const ir::Op* op : ops) EXPECT_NE(op->phase, ir::Phase::Forward);
    EXPECT_TRUE(select(c->result->module, {k, 1, ir::Phase::Forward}).empty());
    EXPECT_TRUE(select(c->result->module, {k, 1, ir::Phase::InputGrad}).empty());
  }
}

TEST(Lowering, AVocabularyParallelHeadFeedsTheLossWithoutGatheringTheLogits) {
  // The head split on the vocabulary (Megatron's column-parallel output
  // layer): the loss runs on each shard (vocab_parallel_cross_entropy),
  // all-reducing per-token maxima (op max) and the sums and label logits
  // (one grouped all-reduce) in the forward and the loss's scalar gradient
  // in the backward; no all-gather moves the logits.
  const int64_t batch = 4, seq = 16, vocab = 64;
  Gpt gpt = make_gpt(1, batch, seq, 32, 8, vocab);
  StrategySpec spec = megatron(gpt, 1, 4, batch);
  set_compute(spec, gpt.graph.nodes[0].children[gpt.graph.nodes[0].children.size() - 2], 1, S("v"));
  auto c = compile(gpt.graph, spec);
  const ir::Module& m = c->result->module;
  EXPECT_EQ(select(m, {ir::OpKind::CrossEntropyParts}).size(), 1u);
  EXPECT_EQ(select(m, {ir::OpKind::CrossEntropyPartsGrad}).size(), 1u);
  EXPECT_TRUE(select(m, {ir::OpKind::CrossEntropy}).empty());
  EXPECT_TRUE(select(m, {ir::OpKind::AllGather, 1}).empty());
  int max = 0, sums = 0;
  for (const ir::Op* op : select(m, {ir::OpKind::AllReduce, 1, ir::Phase::Forward})) {
    if (ir::AttrReader(m, c->f(), *op).string("op") == "max") ++max;
    if (op->operand_count == 2) ++sums;
  }
  EXPECT_EQ(max, 1);
  EXPECT_EQ(sums, 1);
}

TEST(Lowering, SequenceParallelTurnsEachAllReduceIntoReduceScatterAndAllGather) {
  const int layers = 2, tp = 4;
  const int64_t batch = 4, seq = 16, hidden = 32;
  Gpt gpt = make_gpt(layers, batch, seq, hidden, 8, 64);
  StrategySpec spec = megatron(gpt, 1, tp, batch);
  for (const Gpt::Block& b : gpt.blocks)
    for (int32_t n : {b.ln1, b.res1, b.ln2, b.res2}) set_compute(spec, n, 1, S("s"));
  auto c = compile(gpt.graph, spec);
  const ir::Module& m = c->result->module;
  double activation = double(batch) * seq * hidden * 4;
  EXPECT_TRUE(select(m, {ir::OpKind::AllReduce, 1, ir::Phase::Forward}).empty());
  EXPECT_TRUE(select(m, {ir::OpKind::AllReduce, 1, ir::Phase::InputGrad}).empty());
  for (ir::Phase phase : {ir::Phase::Forward, ir::Phase::InputGrad}) {
    auto rs = select(m, {ir::OpKind::ReduceScatter, 1, phase});
    auto ag = select(m, {ir::OpKind::AllGather, 1, phase});
    EXPECT_EQ(rs.size(), size_t(2 * layers)) << ir::phase_name(phase);
    // Backward: the all-gathers that mirror the forward reduce-scatters, and
    // the layer norms' outputs gathered again for the column-parallel
    // linears' weight gradients (attention's q, k and v share one).
    size_t gathers = phase == ir::Phase::Forward ? 2 * layers : 4 * layers;
    EXPECT_EQ(ag.size(), gathers) << ir::phase_name(phase);
    for (const ir::Op* op : rs) EXPECT_DOUBLE_EQ(operand_bytes(m, *op), activation);
    for (const ir::Op* op : ag) EXPECT_DOUBLE_EQ(result_bytes(m, *op), activation);
  }
}

TEST(Lowering, TpCommOverlapPipelinesTheSequenceParallelCollectivesWithTheirGemms) {
  // tp_comm_overlap (Megatron's --tp-comm-overlap): each forward all-gather
  // of a norm's output feeds only GEMMs (q, k, v; fc1) and each forward
  // reduce-scatter follows a GEMM (proj, fc2): all are written with
  // chunks = tp for the simulator to pipeline; without the option, none.
  const int layers = 2, tp = 4;
  Gpt gpt = make_gpt(layers, 4, 16, 32, 8, 64);
  StrategySpec spec = megatron(gpt, 1, tp, 4);
  for (const Gpt::Block& b : gpt.blocks)
    for (int32_t n : {b.ln1, b.res1, b.ln2, b.res2}) set_compute(spec, n, 1, S("s"));
  auto chunked = [&](bool overlap, ir::OpKind kind) {
    spec.train.tp_comm_overlap = overlap;
    auto c = compile(gpt.graph, spec);
    int n = 0;
    for (const ir::Op* op : select(c->result->module, {kind, 1, ir::Phase::Forward}))
      n += ir::AttrReader(c->result->module, c->f(), *op).integer("chunks") == tp;
    return n;
  };
  EXPECT_EQ(chunked(true, ir::OpKind::AllGather), 2 * layers);
  EXPECT_EQ(chunked(true, ir::OpKind::ReduceScatter), 2 * layers);
  EXPECT_EQ(chunked(false, ir::OpKind::AllGather), 0);
  EXPECT_EQ(chunked(false, ir::OpKind::ReduceScatter), 0);
}

TEST(Lowering, Fp8QuantizesSequenceParallelShardsBeforeGatheringThem) {
  // Under sequence parallelism an FP8 GEMM's input shard is quantized to
  // e4m3 and gathered in fp8, in the forward and again for the weight
  // gradient, and its output gradient's shard is quantized to e5m2 and
  // gathered in fp8, as Transformer Engine moves them: no tensor-parallel
  // all-gather of the blocks moves bf16.
  const int layers = 2, tp = 4;
  Gpt gpt = make_gpt(layers, 4, 16, 128, 8, 64);
  for (const Gpt::Block& b : gpt.blocks)
    gpt.graph.nodes[gpt.graph.nodes[gpt.graph.nodes[b.q].parent].parent].repeated = true;
  StrategySpec spec = megatron(gpt, 1, tp, 4);
  spec.train.precision = ir::DType::BF16;
  spec.train.fp8 = Fp8Recipe::Tensorwise;
  for (const Gpt::Block& b : gpt.blocks)
    for (int32_t n : {b.ln1, b.res1, b.ln2, b.res2}) set_compute(spec, n, 1, S("s"));
  auto c = compile(gpt.graph, spec);
  const ir::Module& m = c->result->module;
  std::map<std::pair<ir::Phase, ir::DType>, int> gathers;
  for (const ir::Op* op : select(m, {ir::OpKind::AllGather, 1}))
    ++gathers[{op->phase, m.value_type(c->f(), op->first_result).dtype}];
  EXPECT_EQ((gathers[{ir::Phase::Forward, ir::DType::F8E4M3}]), 2 * layers);
  EXPECT_EQ((gathers[{ir::Phase::InputGrad, ir::DType::F8E5M2}]), 2 * layers);
  EXPECT_EQ((gathers[{ir::Phase::InputGrad, ir::DType::F8E4M3}]), 2 * layers);
  EXPECT_EQ((gathers[{ir::Phase::Forward, ir::DType::BF16}]), 0);
  EXPECT_EQ((gathers[{ir::Phase::InputGrad, ir::DType::BF16}]), 0);
}

TEST(Lowering, SequenceParallelKeepsTheShardOfWhatTheForwardGathered) {
  // Megatron keeps the layer norm's output as its 1/t shard between forward
  // and backward and gathers it again for the weight gradient: no backward
  // op reads a value the forward all-gathered.
  Gpt gpt = make_gpt(2, 4, 16, 32, 8, 64);
  StrategySpec spec = megatron(gpt, 1, 4, 4);
  for (const Gpt::Block& b : gpt.blocks)
    for (int32_t n : {b.ln1, b.res1, b.ln2, b.res2}) set_compute(spec, n, 1, S("s"));
  auto c = compile(gpt.graph, spec);
  const ir::Function& f = c->f();
  std::vector<uint8_t> gathered_in_forward(f.values.size(), 0);
  int readers = 0;
  for (const ir::Op& op : f.ops) {
    if (op.kind == ir::OpKind::AllGather && op.phase == ir::Phase::Forward) gathered_in_forward[f.result(op)] = 1;
    if (op.phase != ir::Phase::InputGrad && op.phase != ir::Phase::WeightGrad) continue;
    for (ir::ValueId v : f.operands(op)) {
      EXPECT_FALSE(gathered_in_forward[v]) << ir::print_op(c->module(), f, op);
      ++readers;
    }
  }
  EXPECT_GT(readers, 0);
}

TEST(Lowering, ZeroOneAndTwoReduceScatterAndAllGatherTheParameterBytes) {
  for (bool zero2 : {false, true}) {
    auto mlp = make_mlp(2, 16, 32, 8);
    StrategySpec spec = make_spec(mlp.graph, {{"dp", 4}}, 16, 2);
    set_default(spec, 0, S("b"));
    for (size_t t = 0; t < mlp.graph.tensors.size(); ++t) {
      if (mlp.graph.tensors[t].kind != TensorKind::Param) continue;
      spec.memory[t].optimizer = TensorLayoutConfig{{ir::Sbp{ir::Sbp::Split, 0}}, {}};
      if (zero2) spec.memory[t].grad = spec.memory[t].optimizer;
    }
    auto c = compile(mlp.graph, spec);
    const ir::Module& m = c->result->module;
    EXPECT_TRUE(select(m, {ir::OpKind::AllReduce, 0}).empty());
    double scattered = 0, gathered = 0;
    auto rs = select(m, {ir::OpKind::ReduceScatter, 0});
    for (const ir::Op* op : rs) scattered += operand_bytes(m, *op);
    for (const ir::Op* op : select(m, {ir::OpKind::AllGather, 0})) gathered += result_bytes(m, *op);
    // ZeRO-2 reduce-scatters every micro-batch's gradient; ZeRO-1 the sum once.
    EXPECT_DOUBLE_EQ(scattered, param_bytes(mlp.graph) * (zero2 ? 2 : 1)) << zero2;
    EXPECT_DOUBLE_EQ(gathered, param_bytes(mlp.graph)) << zero2;
    EXPECT_EQ(rs.front()->phase, ir::Phase::WeightGrad);
  }
}

// `** memory(optimizer) [dp: sbp]` on a [dp, tp] mesh: only dp written.
void shard_optimizer_over_dp(StrategySpec& spec, const LogicalGraph& graph, ir::Sbp sbp) {
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    if (graph.tensors[t].kind != TensorKind::Param) continue;
    TensorLayoutConfig zero1{{sbp, kBroadcast}, {}};
    zero1.written = 1u;
    spec.memory[t].optimizer = zero1;
  }
}

TEST(Lowering, ZeroOneOverDataParallelKeepsTheTensorParallelSplit) {
  // `** memory(optimizer) [dp: S(0)]` on a [dp, tp] mesh: the tp axis is not
  // written, so each weight's Adam state is sharded over dp on top of the
  // tp split its compute config gives (Megatron's distributed optimizer
  // shards each tensor-parallel rank's own parameters), not replicated over
  // tp.
  const int tp = 4, dp = 2;
  Gpt gpt = make_gpt(2, 8, 16, 32, 8, 64);
  StrategySpec spec = megatron(gpt, dp, tp, 8);
  shard_optimizer_over_dp(spec, gpt.graph, ir::Sbp{ir::Sbp::Split, 0});
  auto c = compile(gpt.graph, spec);
  const ir::Module& m = c->result->module;
  const ir::Function& f = c->f();
  int checked = 0;
  for (size_t t = 0; t < gpt.graph.tensors.size(); ++t) {
    const Tensor& tensor = gpt.graph.tensors[t];
    if (tensor.kind != TensorKind::Param) continue;
    bool tp_split = c->result->sbp.layouts[t][1].kind == ir::Sbp::Split;
    for (const ir::Arg& a : f.args) {
      if (m.str(f.values[a.value].name) != tensor.name + ".adam_m") continue;
      double expected = static_cast<double>(tensor.numel()) * 4 / dp / (tp_split ? tp : 1);
      EXPECT_DOUBLE_EQ(static_cast<double>(m.value_type(f, a.value).bytes()), expected) << tensor.name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  // dp's chunks of a dim tp also splits nest outermost (mesh order), so a
  // column-parallel weight's gradient is gathered over tp and sharded again
  // to reach it; S(flat) (the next test) shards each tp rank's block instead.
  EXPECT_FALSE(select(m, {ir::OpKind::AllGather, 1, ir::Phase::WeightGrad}).empty());
  EXPECT_FALSE(select(m, {ir::OpKind::ReduceScatter, 0, ir::Phase::WeightGrad}).empty());
  for (size_t t = 0; t < gpt.graph.tensors.size(); ++t) {
    if (gpt.graph.tensors[t].kind != TensorKind::Param) continue;
    const ir::Layout& value = c->result->sbp.layouts[t];
    const ir::Layout& optimizer = c->result->sbp.optimizer_layouts[t];
    EXPECT_EQ(optimizer[1], value[1]) << gpt.graph.tensors[t].name;
    EXPECT_EQ(optimizer[0], (ir::Sbp{ir::Sbp::Split, 0})) << gpt.graph.tensors[t].name;
  }
}

TEST(Lowering, FlatDistributedOptimizerShardsAnyDataParallelSize) {
  // `[dp: S(flat)]` with dp 3 on a [dp, tp] mesh where no weight dim divides
  // by 3: each tp rank's block of every weight is cut into 3 flat chunks,
  // the last padded; gradients are reduce-scattered into them.
  const int tp = 2, dp = 3;
  Gpt gpt = make_gpt(1, 6, 16, 32, 8, 64);
  StrategySpec spec = megatron(gpt, dp, tp, 6);
  shard_optimizer_over_dp(spec, gpt.graph, ir::Sbp{ir::Sbp::Flat, 0});
  auto c = compile(gpt.graph, spec);
  const ir::Module& m = c->result->module;
  const ir::Function& f = c->f();
  int checked = 0;
  for (size_t t = 0; t < gpt.graph.tensors.size(); ++t) {
    const Tensor& tensor = gpt.graph.tensors[t];
    if (tensor.kind != TensorKind::Param) continue;
    int64_t block = tensor.numel() / (c->result->sbp.layouts[t][1].kind == ir::Sbp::Split ? tp : 1);
    for (const ir::Arg& a : f.args) {
      if (m.str(f.values[a.value].name) != tensor.name + ".adam_m") continue;
      const ir::TensorType& type = m.value_type(f, a.value);
      EXPECT_EQ(type.rank, 1) << tensor.name;
      EXPECT_EQ(type.dims[0], (block + dp - 1) / dp) << tensor.name;
      EXPECT_EQ(m.type(f.values[a.value].logical).numel(), tensor.numel()) << tensor.name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  std::vector<const ir::Op*> scatters = select(m, {ir::OpKind::ReduceScatter, 0, ir::Phase::WeightGrad});
  ASSERT_FALSE(scatters.empty());
  for (const ir::Op* op : scatters) EXPECT_TRUE(ir::AttrReader(m, f, *op).boolean("flat"));
  EXPECT_TRUE(select(m, {ir::OpKind::AllGather, 1, ir::Phase::WeightGrad}).empty());
}

// A data-parallel MLP under the distributed optimizer (ZeRO-1: state and
// fp32 master weights sharded over dp), trained in bf16.
StrategySpec distributed_optimizer_mlp(const testing::Mlp& mlp, bool overlap_param_gather) {
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 4}}, 16, 1);
  set_default(spec, 0, S("b"));
  spec.train.precision = ir::DType::BF16;
  spec.train.overlap_param_gather = overlap_param_gather;
  for (size_t t = 0; t < mlp.graph.tensors.size(); ++t)
    if (mlp.graph.tensors[t].kind == TensorKind::Param)
      spec.memory[t].optimizer = TensorLayoutConfig{{ir::Sbp{ir::Sbp::Split, 0}}, {}};
  return spec;
}

TEST(Lowering, OverlapParamGatherKeepsTheShardAndGathersItOnceBeforeItsFirstUse) {
  // Megatron-Core's --overlap-param-gather: between steps a rank holds its
  // updated bf16 shard; the step gathers it once, on the data-parallel
  // stream into the buffer that holds the shard, before the forward reads
  // it, and the backward reads the same gathered weight.
  auto mlp = make_mlp(2, 16, 32, 8);
  auto c = compile(mlp.graph, distributed_optimizer_mlp(mlp, true));
  const ir::Module& m = c->result->module;
  const ir::Function& f = c->f();
  int params = 0;
  for (const ir::Arg& a : f.args) {
    if (a.kind != ir::ArgKind::Param) continue;
    EXPECT_EQ(m.layout(f.values[a.value].layout)[0], (ir::Sbp{ir::Sbp::Split, 0})) << m.str(f.values[a.value].name);
    ++params;
  }
  ASSERT_GT(params, 0);
  std::vector<const ir::Op*> gathers = select(m, {ir::OpKind::AllGather, 0});
  ASSERT_EQ(gathers.size(), size_t(params));
  for (const ir::Op* op : gathers) {
    EXPECT_EQ(op->phase, ir::Phase::Forward);
    EXPECT_EQ(op->stream, ir::Stream::Grad);
    EXPECT_TRUE(ir::AttrReader(m, f, *op).boolean("in_place"));
    EXPECT_EQ(f.values[f.operands(*op)[0]].def, ir::kNone) << "gathers the stored shard itself";
  }
  // The backward's input gradients read the forward's gathered weights:
  // nothing is gathered again.
  int backward_reads = 0;
  for (const ir::Op& op : f.ops) {
    if (op.phase != ir::Phase::InputGrad) continue;
    for (ir::ValueId v : f.operands(op)) {
      ir::OpId def = f.values[v].def;
      backward_reads += def != ir::kNone && f.ops[def].kind == ir::OpKind::AllGather;
    }
  }
  EXPECT_GT(backward_reads, 0);
  // The optimizer returns the updated shard: nothing is gathered after it.
  EXPECT_TRUE(select(m, {ir::OpKind::AllGather, 0, ir::Phase::Optimizer}).empty());
}

TEST(Lowering, WithoutOverlapParamGatherTheUpdatedWeightsAreGatheredAfterTheOptimizer) {
  auto mlp = make_mlp(2, 16, 32, 8);
  auto c = compile(mlp.graph, distributed_optimizer_mlp(mlp, false));
  const ir::Module& m = c->result->module;
  const ir::Function& f = c->f();
  for (const ir::Arg& a : f.args) {
    if (a.kind != ir::ArgKind::Param) continue;
    EXPECT_EQ(m.layout(f.values[a.value].layout)[0].kind, ir::Sbp::Broadcast) << m.str(f.values[a.value].name);
  }
  std::vector<const ir::Op*> gathers = select(m, {ir::OpKind::AllGather, 0});
  ASSERT_FALSE(gathers.empty());
  for (const ir::Op* op : gathers) {
    EXPECT_EQ(op->phase, ir::Phase::Optimizer);
    EXPECT_FALSE(ir::AttrReader(m, f, *op).boolean("in_place"));
  }
}

TEST(Lowering, ZeroThreeGathersParametersBeforeUseInForwardAndBackward) {
  auto mlp = make_mlp(2, 16, 32, 8);
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 4}}, 16, 1);
  set_default(spec, 0, S("b"));
  int params = 0;
  for (size_t t = 0; t < mlp.graph.tensors.size(); ++t) {
    if (mlp.graph.tensors[t].kind != TensorKind::Param) continue;
    spec.memory[t].value = TensorLayoutConfig{{ir::Sbp{ir::Sbp::Split, 0}}, {}};
    ++params;
  }
  auto c = compile(mlp.graph, spec);
  const ir::Module& m = c->result->module;
  EXPECT_EQ(select(m, {ir::OpKind::AllGather, 0, ir::Phase::Forward}).size(), size_t(params));
  // Backward needs each weight again for the input gradient (the first layer's
  // input needs none).
  EXPECT_EQ(select(m, {ir::OpKind::AllGather, 0, ir::Phase::InputGrad}).size(), size_t(params - 1));
  double scattered = 0;
  for (const ir::Op* op : select(m, {ir::OpKind::ReduceScatter, 0})) scattered += operand_bytes(m, *op);
  EXPECT_DOUBLE_EQ(scattered, param_bytes(mlp.graph));
  EXPECT_TRUE(select(m, {ir::OpKind::AllGather, 0, ir::Phase::Optimizer}).empty());
}

TEST(Lowering, EachWeightGradientIsReducedRightAfterItIsComputed) {
  // ZeRO-2: a layer's gradient is reduce-scattered as soon as its backward
  // produced it, not after the whole backward pass (which would hold every
  // full-size gradient at once).
  auto mlp = make_mlp(3, 16, 32, 8);
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 4}}, 16, 1);
  set_default(spec, 0, S("b"));
  for (size_t t = 0; t < mlp.graph.tensors.size(); ++t)
    if (mlp.graph.tensors[t].kind == TensorKind::Param)
      spec.memory[t].grad = TensorLayoutConfig{{ir::Sbp{ir::Sbp::Split, 0}}, {}};
  auto c = compile(mlp.graph, spec);
  std::string order;  // W: a weight-gradient einsum, R: a gradient reduce-scatter
  for (const ir::Op& op : c->f().ops) {
    if (op.kind == ir::OpKind::Einsum && op.phase == ir::Phase::WeightGrad) order += 'W';
    if (op.kind == ir::OpKind::ReduceScatter) order += 'R';
  }
  EXPECT_EQ(order, "WRWRWRWR");
}

TEST(Lowering, GradientAllReducesFollowTheLastMicroBatchBackwardUnlessTheyWaitForIt) {
  // Two micro-batches of data parallelism. Overlapped (DDP, Megatron-Core):
  // each weight's all-reduce is queued right after its last micro-batch's
  // weight gradient, last layer first. Not overlapped (Megatron-LM 2021):
  // every all-reduce after the whole backward, the first layer's first, so
  // on the in-order grad stream none can start before the backward ends.
  std::vector<std::vector<double>> orders;  // the bytes of each reduction, in order
  for (bool overlap : {true, false}) {
    auto mlp = make_mlp(3, 16, 32, 8);
    StrategySpec spec = make_spec(mlp.graph, {{"dp", 4}}, 16, 2);
    spec.train.overlap_grad_reduce = overlap;
    spec.train.grad_bucket = 0;  // each tensor alone
    set_default(spec, 0, S("b"));
    auto c = compile(mlp.graph, spec);
    std::string order;  // W: a weight-gradient einsum, R: a gradient all-reduce
    std::vector<double> reduced;
    for (const ir::Op& op : c->f().ops) {
      if (op.kind == ir::OpKind::Einsum && op.phase == ir::Phase::WeightGrad) order += 'W';
      if (op.kind == ir::OpKind::AllReduce && op.phase == ir::Phase::WeightGrad) {
        order += 'R';
        reduced.push_back(operand_bytes(c->module(), op));
      }
    }
    EXPECT_EQ(order, overlap ? "WWWWWRWRWRWR" : "WWWWWWWWRRRR") << overlap;
    orders.push_back(reduced);
  }
  // The same reductions (the layers differ in size), in opposite orders.
  std::reverse(orders[1].begin(), orders[1].end());
  EXPECT_EQ(orders[0], orders[1]);
  EXPECT_NE(orders[0].front(), orders[0].back());
}

TEST(Lowering, WithoutOverlapAnInterleavedRankReducesAfterAllItsChunks) {
  // pp 2 x dp 2, interleaved with 2 chunks: pipeline rank 0 holds stages 0
  // and 2. Not overlapped (Megatron-LM 2021 all-reduces after the pipeline
  // flush), no reduction of either stage is queued before the last
  // weight-gradient op of both; overlapped, stage 2's finish first.
  for (bool overlap : {true, false}) {
    auto mlp = make_mlp(4, 16, 32, 8);
    StrategySpec spec = make_spec(mlp.graph, {{"pp", 2}, {"dp", 2}}, 16, 4);
    spec.train.overlap_grad_reduce = overlap;
    set_default(spec, 1, S("b"));
    spec.pipeline = {0, mlp.layers_node, {}, {}};
    ScheduleConfig sc;
    sc.kind = schedule::ScheduleKind::Interleaved;
    sc.micro_batches = 4;
    sc.virtual_stages = 2;
    spec.schedule[mlp.layers_node] = sc;
    auto c = compile(mlp.graph, spec);
    ASSERT_TRUE(c->result);
    ASSERT_EQ(c->result->resolved.num_stages, 4);
    const std::vector<ir::Op>& ops = c->f().ops;
    auto on_rank_0 = [](const ir::Op& op) { return op.stage == 0 || op.stage == 2; };
    size_t last_weight_grad = 0, first_reduce = ops.size();
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!on_rank_0(ops[i])) continue;
      if (ops[i].kind == ir::OpKind::Einsum && ops[i].phase == ir::Phase::WeightGrad) last_weight_grad = i;
      if (ops[i].kind == ir::OpKind::AllReduce && ops[i].phase == ir::Phase::WeightGrad)
        first_reduce = std::min(first_reduce, i);
    }
    ASSERT_LT(first_reduce, ops.size()) << overlap;
    EXPECT_EQ(first_reduce > last_weight_grad, !overlap) << overlap;
  }
}

TEST(Lowering, GradientBucketsReduceTogetherOnceFull) {
  // Three 32x32 layers (1024 elements each) and an 8x32 head (256), whose
  // gradients complete head first. A bucket of 1300 elements is full with
  // the head and two layers (2304) and reduced as one grouped all-reduce
  // right after the third's last weight gradient; the first layer's is
  // reduced alone when the backward ends. Without buckets (0), four.
  auto mlp = make_mlp(3, 16, 32, 8);
  for (int64_t bucket : {int64_t{1300}, int64_t{0}}) {
    StrategySpec spec = make_spec(mlp.graph, {{"dp", 4}}, 16, 2);
    spec.train.grad_bucket = bucket;
    set_default(spec, 0, S("b"));
    auto c = compile(mlp.graph, spec);
    std::string order;
    for (const ir::Op& op : c->f().ops) {
      if (op.kind == ir::OpKind::Einsum && op.phase == ir::Phase::WeightGrad) order += 'W';
      if (op.kind == ir::OpKind::AllReduce) order += std::to_string(op.operand_count);
    }
    EXPECT_EQ(order, bucket ? "WWWWWWW3W1" : "WWWWW1W1W1W1") << bucket;
  }
}

TEST(Lowering, PipelineSendsActivationsForwardAndGradientsBack) {
  auto mlp = make_mlp(4, 16, 32, 8);
  StrategySpec spec = make_spec(mlp.graph, {{"pp", 2}, {"dp", 2}}, 16, 4);
  set_default(spec, 1, S("b"));
  spec.pipeline = {0, mlp.layers_node, {}, {}};
  auto c = compile(mlp.graph, spec);
  const ir::Module& m = c->result->module;
  EXPECT_EQ(select(m, {ir::OpKind::Send, -1, ir::Phase::Forward}).size(), 4u);
  EXPECT_EQ(select(m, {ir::OpKind::Recv, -1, ir::Phase::Forward}).size(), 4u);
  EXPECT_EQ(select(m, {ir::OpKind::Send, -1, ir::Phase::InputGrad}).size(), 4u);
  EXPECT_EQ(select(m, {ir::OpKind::Recv, -1, ir::Phase::InputGrad}).size(), 4u);
  // Rank 0 (stage 0) follows 1F1B: one warm-up forward, then F B pairs.
  std::vector<std::pair<ir::Phase, int32_t>> order;
  for (const ir::Op& op : m.functions[0].ops) {
    if (op.stage != 0 || op.kind != ir::OpKind::Einsum) continue;
    if (op.phase == ir::Phase::Forward || op.phase == ir::Phase::InputGrad || op.phase == ir::Phase::WeightGrad) {
      ir::Phase p = op.phase == ir::Phase::Forward ? ir::Phase::Forward : ir::Phase::InputGrad;
      if (order.empty() || order.back() != std::pair{p, op.micro_batch}) order.push_back({p, op.micro_batch});
    }
  }
  std::vector<std::pair<ir::Phase, int32_t>> expected = {
      {ir::Phase::Forward, 0},   {ir::Phase::Forward, 1}, {ir::Phase::InputGrad, 0}, {ir::Phase::Forward, 2},
      {ir::Phase::InputGrad, 1}, {ir::Phase::Forward, 3}, {ir::Phase::InputGrad, 2}, {ir::Phase::InputGrad, 3}};
  EXPECT_EQ(order, expected);
}

TEST(Lowering, RecomputationReplaysForwardBeforeBackward) {
  auto mlp = make_mlp(2, 8, 16, 4);
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 1}}, 8, 2);
  ScheduleConfig rc;
  rc.recompute = true;
  spec.schedule[mlp.layers_node] = rc;
  auto c = compile(mlp.graph, spec);
  const ir::Module& m = c->result->module;
  // Each micro-batch recomputes the two layers' einsum and relu.
  EXPECT_EQ(select(m, {ir::OpKind::Einsum, -1, ir::Phase::Recompute}).size(), 4u);
  EXPECT_EQ(select(m, {ir::OpKind::Relu, -1, ir::Phase::Recompute}).size(), 4u);
}

TEST(Lowering, RecomputationReplaysOneLayerJustBeforeItsBackward) {
  auto mlp = make_mlp(3, 8, 16, 4);
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 1}}, 8, 1);
  ScheduleConfig rc;
  rc.recompute = true;
  spec.schedule[mlp.layers_node] = rc;
  auto c = compile(mlp.graph, spec);
  const ir::Function& f = c->f();
  // The backward's einsums, by phase: each layer's replay (R) comes right
  // before its backward (B), last layer first: B(head) R B R B R B.
  std::string order;
  for (const ir::Op& op : f.ops) {
    if (op.kind != ir::OpKind::Einsum || op.phase == ir::Phase::Forward) continue;
    char p = op.phase == ir::Phase::Recompute ? 'R' : 'B';
    if (order.empty() || order.back() != p) order += p;
  }
  EXPECT_EQ(order, "BRBRBRB");
}

TEST(Lowering, InferenceHasNoBackwardOrOptimizer) {
  auto mlp = make_mlp(2, 8, 16, 4);
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 2}}, 8, 2);
  spec.train.training = false;
  set_default(spec, 0, S("b"));
  auto c = compile(mlp.graph, spec);
  for (const ir::Op& op : c->result->module.functions[0].ops) EXPECT_EQ(op.phase, ir::Phase::Forward);
}

TEST(Lowering, WeightsAreStoredInTheComputePrecisionWithAnFp32MasterWhenTraining) {
  // fp16 serving holds 2 bytes per parameter and casts nothing. Training
  // stores the same fp16 weights plus an fp32 master copy laid out as the
  // optimizer state (Megatron's mixed-precision optimizer): under ZeRO-1
  // the master is sharded with Adam's moments, and the updated master is
  // cast to fp16 before it is all-gathered (2 bytes per parameter, not 4).
  auto mlp = make_mlp(2, 8, 16, 4);
  for (bool training : {false, true}) {
    StrategySpec spec = make_spec(mlp.graph, {{"dp", 2}}, 8, 2);
    spec.train.training = training;
    spec.train.precision = ir::DType::F16;
    set_default(spec, 0, S("b"));
    double params = 0;
    for (size_t t = 0; t < mlp.graph.tensors.size(); ++t) {
      if (mlp.graph.tensors[t].kind != TensorKind::Param) continue;
      params += static_cast<double>(mlp.graph.tensors[t].numel());
      spec.memory[t].optimizer = TensorLayoutConfig{{ir::Sbp{ir::Sbp::Split, 0}}, {}};
    }
    auto c = compile(mlp.graph, spec);
    const ir::Module& m = c->module();
    const ir::Function& f = c->f();
    int masters = 0;
    for (const ir::Arg& a : f.args) {
      const ir::TensorType& type = m.value_type(f, a.value);
      if (a.kind == ir::ArgKind::Param) {
        EXPECT_EQ(type.dtype, ir::DType::F16);
      }
      if (!ir::master_of(m.value_name(f, a.value)).empty()) {
        EXPECT_EQ(type.dtype, ir::DType::F32);
        EXPECT_EQ(m.layout(f.values[a.value].layout)[0], (ir::Sbp{ir::Sbp::Split, 0}));
        ++masters;
      }
    }
    EXPECT_EQ(masters, training ? 3 : 0);
    // No weight is cast in the forward; the one cast per micro-batch is the
    // loss's upcast of the logits to fp32.
    std::vector<const ir::Op*> forward_casts = select(m, {ir::OpKind::Cast, -1, ir::Phase::Forward});
    EXPECT_EQ(forward_casts.size(), 2u);
    for (const ir::Op* op : forward_casts) EXPECT_EQ(m.value_type(f, op->first_result).dtype, ir::DType::F32);
    if (!training) continue;
    EXPECT_EQ(select(m, {ir::OpKind::Cast, -1, ir::Phase::Optimizer}).size(), 3u);
    double gathered = 0;
    for (const ir::Op* op : select(m, {ir::OpKind::AllGather, 0})) gathered += result_bytes(m, *op);
    EXPECT_DOUBLE_EQ(gathered, params * 2);
  }
}

TEST(Lowering, TheLossRunsInFp32OnUpcastLogitsWhoseGradientReturnsInTheirPrecision) {
  // bf16 training (Megatron-LM, torchtitan): the cross-entropy reads an
  // fp32 copy of the logits, its backward that same copy, and the logits'
  // gradient is cast back to bf16 before it reaches the head.
  auto mlp = make_mlp(2, 8, 16, 4);
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 2}}, 8, 1);
  spec.train.precision = ir::DType::BF16;
  set_default(spec, 0, S("b"));
  auto c = compile(mlp.graph, spec);
  const ir::Module& m = c->module();
  const ir::Function& f = c->f();
  std::vector<const ir::Op*> losses = select(m, {ir::OpKind::CrossEntropy});
  std::vector<const ir::Op*> grads = select(m, {ir::OpKind::CrossEntropyGrad});
  ASSERT_EQ(losses.size(), 1u);
  ASSERT_EQ(grads.size(), 1u);
  ir::ValueId upcast = f.operands(*losses[0])[0];
  EXPECT_EQ(m.value_type(f, upcast).dtype, ir::DType::F32);
  EXPECT_EQ(f.operands(*grads[0])[1], upcast);
  ir::ValueId logits_grad = grads[0]->first_result;
  bool cast_back = false;
  for (const ir::Op* op : select(m, {ir::OpKind::Cast}))
    cast_back |= f.operands(*op)[0] == logits_grad && m.value_type(f, op->first_result).dtype == ir::DType::BF16;
  EXPECT_TRUE(cast_back);
}

TEST(Lowering, PureHalfPrecisionTrainingKeepsNoMasterAndReducesHalfPrecisionGradients) {
  // master_weights = false, grad_precision = fp16 (DistIR's pure fp16
  // runs, DeepSpeed's fp16 gradients): Adam updates the fp16 weights with
  // fp16 moments, and the data-parallel all-reduce moves 2 bytes per
  // parameter.
  auto mlp = make_mlp(2, 8, 16, 4);
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 2}}, 8, 1);
  spec.train.precision = ir::DType::F16;
  spec.train.master_weights = false;
  spec.train.grad_precision = ir::DType::F16;
  set_default(spec, 0, S("b"));
  double params = 0;
  for (const Tensor& t : mlp.graph.tensors)
    if (t.kind == TensorKind::Param) params += static_cast<double>(t.numel());
  auto c = compile(mlp.graph, spec);
  const ir::Module& m = c->module();
  const ir::Function& f = c->f();
  for (const ir::Arg& a : f.args) {
    if (a.kind == ir::ArgKind::Input) continue;
    EXPECT_EQ(m.value_type(f, a.value).dtype, ir::DType::F16) << m.value_name(f, a.value);
    EXPECT_TRUE(ir::master_of(m.value_name(f, a.value)).empty());
  }
  EXPECT_TRUE(select(m, {ir::OpKind::Cast, -1, ir::Phase::Optimizer}).empty());
  double reduced = 0;
  for (const ir::Op* op : select(m, {ir::OpKind::AllReduce, 0})) reduced += operand_bytes(m, *op);
  EXPECT_DOUBLE_EQ(reduced, params * 2);
}

}  // namespace
}  // namespace dstc::compiler

namespace dstc::compiler {
namespace {

TEST(Lowering, ThreeDParallelGptVerifiesUnderEverySchedule) {
  using schedule::ScheduleKind;
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1}) {
    Gpt gpt = make_gpt(4, 8, 8, 16, 4, 32);
    StrategySpec spec = make_spec(gpt.graph, {{"pp", 2}, {"dp", 2}, {"tp", 2}}, 8, 4);
    set_default(spec, 1, S("b"));
    for (const Gpt::Block& b : gpt.blocks) {
      for (int32_t n : {b.q, b.k, b.v, b.attn, b.proj}) set_compute(spec, n, 2, S("n"));
      for (int32_t n : {b.fc1, b.act, b.fc2}) set_compute(spec, n, 2, S("f"));
    }
    spec.pipeline = {0, gpt.blocks_node, {}, {}};
    ScheduleConfig sc;
    sc.kind = kind;
    sc.micro_batches = 4;
    if (kind == ScheduleKind::Interleaved) sc.virtual_stages = 2;
    spec.schedule[gpt.blocks_node] = sc;
    auto c = compile(gpt.graph, spec);
    ASSERT_TRUE(c->result) << schedule::schedule_kind_name(kind);
    EXPECT_EQ(c->result->resolved.num_stages, kind == ScheduleKind::Interleaved ? 4 : 2);
    bool split_backward = false;
    for (const ir::Op& op : c->result->module.functions[0].ops)
      split_backward |= op.phase == ir::Phase::WeightGrad && op.micro_batch >= 0 && op.kind == ir::OpKind::Einsum;
    EXPECT_TRUE(split_backward) << schedule::schedule_kind_name(kind);
  }
}

// A two-block GPT in bf16 on one device, its blocks repeated, the blocks'
// linear layers in FP8 with `recipe`.
std::unique_ptr<Compiled> compile_fp8_gpt(Fp8Recipe recipe) {
  Gpt gpt = make_gpt(2, 8, 16, 32, 8, 64);
  for (const Gpt::Block& b : gpt.blocks)
    gpt.graph.nodes[gpt.graph.nodes[gpt.graph.nodes[b.q].parent].parent].repeated = true;
  StrategySpec spec = make_spec(gpt.graph, {{"dp", 1}}, 8, 1);
  spec.train.precision = ir::DType::BF16;
  spec.train.fp8 = recipe;
  set_default(spec, 0, S("b"));
  return compile(gpt.graph, spec);
}

TEST(Lowering, Fp8RunsTheBlocksWeightGemmsOnQuantizedCopiesAndKeepsTheHeadInItsPrecision) {
  // fp8 = tensorwise (Transformer Engine's linear layers): in each block,
  // every einsum of an activation with a weight reads e4m3 copies, once per
  // value (q, k and v share their input's), and its two gradients read an
  // e5m2 copy of the output gradient; all write bf16. The head, outside
  // the repeated blocks, stays in bf16.
  auto c = compile_fp8_gpt(Fp8Recipe::Tensorwise);
  const ir::Module& m = c->module();
  const ir::Function& f = c->f();
  int e4m3 = 0, e5m2 = 0;
  for (const ir::Op* op : select(m, {ir::OpKind::Quantize})) {
    ir::DType t = m.value_type(f, op->first_result).dtype;
    (t == ir::DType::F8E4M3 ? e4m3 : e5m2) += 1;
    EXPECT_EQ(ir::AttrReader(m, f, *op).integer("block"), 0);
  }
  // Per block: inputs of qkv, proj, fc1, fc2 and their 6 weights; 6 gradients.
  EXPECT_EQ(e4m3, 2 * 10);
  EXPECT_EQ(e5m2, 2 * 6);
  int fp8_einsums = 0, bf16_einsums = 0;
  for (const ir::Op* op : select(m, {ir::OpKind::Einsum})) {
    if (op->operand_count != 2) continue;
    bool fp8 = ir::is_fp8(m.value_type(f, f.operands(*op)[0]).dtype);
    EXPECT_EQ(fp8, ir::is_fp8(m.value_type(f, f.operands(*op)[1]).dtype));
    EXPECT_EQ(m.value_type(f, op->first_result).dtype, ir::DType::BF16);
    (fp8 ? fp8_einsums : bf16_einsums) += 1;
  }
  EXPECT_EQ(fp8_einsums, 2 * 6 * 3);  // forward, input gradient, weight gradient
  EXPECT_EQ(bf16_einsums, 3);         // the head's
}

TEST(Lowering, Fp8RowwiseCastsEachBackwardGemmsOperandsAnewAsTorchaoDoes) {
  // fp8 = rowwise (torchao's linear): one scale per row (block -1); each
  // linear layer casts its own input and weight (q, k and v each their own
  // copy of x), and the backward casts again from the bf16 input and
  // weight it kept: per linear layer the weight for the input gradient,
  // the input for the weight gradient, and the output gradient once for
  // each.
  auto c = compile_fp8_gpt(Fp8Recipe::Rowwise);
  const ir::Module& m = c->module();
  const ir::Function& f = c->f();
  int forward_e4m3 = 0, backward_e4m3 = 0, e5m2 = 0;
  for (const ir::Op* op : select(m, {ir::OpKind::Quantize})) {
    EXPECT_EQ(ir::AttrReader(m, f, *op).integer("block"), ir::kRowwiseBlock);
    if (m.value_type(f, op->first_result).dtype == ir::DType::F8E5M2)
      ++e5m2;
    else
      ++(op->phase == ir::Phase::Forward ? forward_e4m3 : backward_e4m3);
  }
  EXPECT_EQ(forward_e4m3, 2 * 6 * 2);   // 6 linear layers a block
  EXPECT_EQ(backward_e4m3, 2 * 6 * 2);  // each linear's weight and input again
  EXPECT_EQ(e5m2, 2 * 6 * 2);           // each linear's gradient, once per GEMM
  // No backward GEMM reads a copy the forward made.
  for (const ir::Op* op : select(m, {ir::OpKind::Einsum})) {
    if (op->phase == ir::Phase::Forward) continue;
    for (ir::ValueId v : f.operands(*op)) {
      if (f.values[v].def == ir::kNone) continue;
      const ir::Op& def = f.ops[f.values[v].def];
      if (def.kind == ir::OpKind::Quantize) {
        EXPECT_NE(def.phase, ir::Phase::Forward);
      }
    }
  }
}

}  // namespace
}  // namespace dstc::compiler
