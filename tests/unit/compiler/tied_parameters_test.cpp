// A parameter read on two pipeline stages (GPT's input embedding tied to its
// output projection): PiPPy's TRANSMIT keeps it on the first stage and sends
// it, REPLICATE stores a copy per stage and sums their gradients.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/registry.h"
#include "tests/unit/compiler/compile_and_verify.h"
#include "tests/unit/compiler/test_models.h"

namespace dstc::compiler {
namespace {

using testing::compile;
using testing::Gpt;
using testing::make_gpt;
using testing::make_spec;
using testing::S;
using testing::set_default;

int32_t tensor_named(const LogicalGraph& g, const std::string& name) {
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].name == name) return static_cast<int32_t>(t);
  ADD_FAILURE() << "no tensor " << name;
  return -1;
}

// A 2-stage GPT whose vocabulary head reads the embedding table.
struct TiedGpt {
  Gpt gpt = make_gpt(2, 8, 8, 16, 4, 32);
  int32_t table = tensor_named(gpt.graph, "embed.weight");
  size_t params = 0;

  TiedGpt() {
    int32_t head = tensor_named(gpt.graph, "head.weight");
    for (LogicalOp& op : gpt.graph.ops)
      for (Operand& in : op.inputs)
        if (in.tensor == head) in.tensor = table;
    for (size_t t = 0; t < gpt.graph.tensors.size(); ++t) {
      if (gpt.graph.tensors[t].kind != TensorKind::Param || static_cast<int32_t>(t) == head) continue;
      ++params;
    }
  }

  StrategySpec spec(ParamSharing sharing) const {
    StrategySpec s = make_spec(gpt.graph, {{"pp", 2}, {"dp", 2}}, 8, 4);
    set_default(s, 1, S("b"));
    s.pipeline = {0, gpt.blocks_node, {}, {}};
    s.memory[table].sharing = sharing;
    return s;
  }
};

size_t count(const ir::Function& f, ir::OpKind kind, ir::Phase phase) {
  return static_cast<size_t>(std::count_if(f.ops.begin(), f.ops.end(),
                                           [&](const ir::Op& op) { return op.kind == kind && op.phase == phase; }));
}

std::vector<std::string> param_args(const ir::Module& m, const ir::Function& f) {
  std::vector<std::string> names;
  for (const ir::Arg& a : f.args)
    if (a.kind == ir::ArgKind::Param) names.push_back(m.value_name(f, a.value));
  return names;
}

TEST(TiedParameters, TransmitSendsTheParameterOnceAndItsGradientBack) {
  TiedGpt tied;
  auto c = compile(tied.gpt.graph, tied.spec(ParamSharing::Transmit));
  ASSERT_TRUE(c->result);
  const ir::Function& f = c->f();
  std::vector<std::string> params = param_args(c->module(), f);
  EXPECT_EQ(params.size(), tied.params);
  EXPECT_EQ(std::count(params.begin(), params.end(), "embed.weight"), 1);
  // One activation per micro-batch, plus the table once for the step.
  EXPECT_EQ(count(f, ir::OpKind::Send, ir::Phase::Forward), 4u + 1u);
  size_t table_sends = 0;
  for (const ir::Op& op : f.ops)
    if (op.kind == ir::OpKind::Send && f.values[f.operands(op)[0]].def == ir::kNone) ++table_sends;
  EXPECT_EQ(table_sends, 1u);
  // The last stage's accumulated gradient of the table goes back once.
  EXPECT_EQ(count(f, ir::OpKind::Send, ir::Phase::WeightGrad), 1u);
  EXPECT_EQ(count(f, ir::OpKind::Adam, ir::Phase::Optimizer), tied.params);
}

TEST(TiedParameters, ReplicateStoresACopyPerStageAndSumsTheirGradients) {
  TiedGpt tied;
  auto c = compile(tied.gpt.graph, tied.spec(ParamSharing::Replicate));
  ASSERT_TRUE(c->result);
  const ir::Function& f = c->f();
  std::vector<std::string> params = param_args(c->module(), f);
  EXPECT_EQ(params.size(), tied.params + 1);
  EXPECT_EQ(std::count(params.begin(), params.end(), "embed.weight"), 1);
  EXPECT_EQ(std::count(params.begin(), params.end(), "embed.weight@stage1"), 1);
  // No per-step transfer of the value; the gradients cross both ways.
  EXPECT_EQ(count(f, ir::OpKind::Send, ir::Phase::Forward), 4u);
  EXPECT_EQ(count(f, ir::OpKind::Send, ir::Phase::WeightGrad), 2u);
  // Both copies update from the same sum, added in the same order.
  std::vector<const ir::Op*> updates;
  for (const ir::Op& op : f.ops)
    if (op.kind == ir::OpKind::Adam) {
      std::string name = c->module().value_name(f, f.operands(op)[0]);
      if (name.rfind("embed.weight", 0) == 0) updates.push_back(&op);
    }
  ASSERT_EQ(updates.size(), 2u);
  for (const ir::Op* update : updates) {
    const ir::Op& sum = f.ops[f.values[f.operands(*update)[1]].def];
    ASSERT_EQ(sum.kind, ir::OpKind::Add);
    const ir::Op& first = f.ops[f.values[f.operands(sum)[0]].def];
    const ir::Op& second = f.ops[f.values[f.operands(sum)[1]].def];
    // Stage 0's gradient first: computed on stage 0, received on stage 1.
    EXPECT_EQ(first.kind == ir::OpKind::Recv, update->stage == 1);
    EXPECT_EQ(second.kind == ir::OpKind::Recv, update->stage == 0);
  }
}

TEST(TiedParameters, StagesOnTheSameDevicesShareOneCopy) {
  // Interleaving two virtual stages on one pipeline rank: the embedding
  // (stage 0) and the head (stage 1) run on the same devices.
  TiedGpt tied;
  StrategySpec spec = make_spec(tied.gpt.graph, {{"pp", 1}, {"dp", 2}}, 8, 4);
  set_default(spec, 1, S("b"));
  spec.pipeline = {0, tied.gpt.blocks_node, {}, {}};
  ScheduleConfig sc;
  sc.kind = schedule::ScheduleKind::Interleaved;
  sc.virtual_stages = 2;
  sc.micro_batches = 4;
  spec.schedule[tied.gpt.blocks_node] = sc;
  spec.memory[tied.table].sharing = ParamSharing::Replicate;
  auto c = compile(tied.gpt.graph, spec);
  ASSERT_TRUE(c->result);
  EXPECT_EQ(c->result->resolved.num_stages, 2);
  EXPECT_EQ(param_args(c->module(), c->f()).size(), tied.params);
  EXPECT_EQ(count(c->f(), ir::OpKind::Send, ir::Phase::WeightGrad), 0u);
  EXPECT_EQ(count(c->f(), ir::OpKind::Adam, ir::Phase::Optimizer), tied.params);
}

}  // namespace
}  // namespace dstc::compiler
