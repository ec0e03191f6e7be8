// The verifier on modules built through the C++ API (the compiler's path),
// the rank projection of the DistIR MLP pipeline, and module memory.
#include <gtest/gtest.h>

#include "ir/dot.h"
#include "ir/parser.h"
#include "ir/projection.h"
#include "ir/registry.h"
#include "ir/verifier.h"

namespace dstc::ir {
namespace {

struct Built {
  Module m;
  DeviceSetId all = 0;
};

// x -> relu -> gelu on a 2-device mesh.
Built two_op_module() {
  Built b;
  b.m.set_mesh(Mesh("world", {{"dp", 2}}));
  b.all = b.m.intern_devices(DeviceSet::whole(b.m.mesh()));
  Function& f = b.m.add_function("f");
  Builder builder(b.m, f);
  ValueId x = builder.add_arg("x", ArgKind::Input, TensorType(DType::F32, {4}), b.all);
  OpSpec relu;
  relu.kind = OpKind::Relu;
  relu.devices = b.all;
  ValueId in[] = {x};
  relu.operands = in;
  ValueId r = builder.append_value(relu);
  OpSpec gelu = relu;
  gelu.kind = OpKind::Gelu;
  ValueId mid[] = {r};
  gelu.operands = mid;
  builder.append_value(gelu);
  return b;
}

TEST(Verifier, AcceptsABuiltModule) {
  Built b = two_op_module();
  SourceManager sm;
  DiagnosticEngine diags(sm);
  EXPECT_TRUE(verify_module(b.m, diags));
  EXPECT_FALSE(diags.has_errors());
}

TEST(Verifier, ReportsUseBeforeDefinition) {
  Built b = two_op_module();
  Function& f = b.m.functions[0];
  // Make the first op read the second op's result.
  f.operand_pool[f.ops[0].operand_begin] = f.ops[1].first_result;
  SourceManager sm;
  DiagnosticEngine diags(sm);
  EXPECT_FALSE(verify_module(b.m, diags));
  ASSERT_FALSE(diags.diagnostics().empty());
  EXPECT_EQ(diags.diagnostics()[0].kind.name, "ir-use-before-def");
  EXPECT_NE(diags.diagnostics()[0].message.find("uses %2 before it is defined"), std::string::npos)
      << diags.diagnostics()[0].message;
}

TEST(Verifier, ReportsWrongResultCount) {
  Built b = two_op_module();
  b.m.functions[0].ops[1].result_count = 0;
  SourceManager sm;
  DiagnosticEngine diags(sm);
  EXPECT_FALSE(verify_module(b.m, diags));
  EXPECT_EQ(diags.diagnostics()[0].kind.name, "ir-signature");
}

TEST(Verifier, BuilderInfersResultTypes) {
  Built b = two_op_module();
  const Function& f = b.m.functions[0];
  EXPECT_EQ(b.m.value_type(f, f.ops[1].first_result), TensorType(DType::F32, {4}));
  EXPECT_EQ(f.values[f.ops[1].first_result].def, 1u);
}

std::optional<Module> parse_golden(SourceManager& sm, DiagnosticEngine& diags, const char* name) {
  return parse_file(sm, std::string(DSTC_SOURCE_DIR) + "/tests/golden/ir/" + name, diags);
}

TEST(Projection, DistIrMlpPipelineGivesEachRankItsStage) {
  SourceManager sm;
  DiagnosticEngine diags(sm);
  std::optional<Module> m = parse_golden(sm, diags, "mlp_pipeline.ir");
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(verify_module(*m, diags));
  const Function& f = m->functions[0];
  RankProgram r0 = project_rank(*m, f, 0);
  RankProgram r1 = project_rank(*m, f, 1);
  EXPECT_EQ(r0.ops.size() + r1.ops.size(), f.ops.size());  // every op runs on exactly one stage
  EXPECT_EQ(r0.args.size(), 2u);                           // w1, x
  ASSERT_EQ(r0.returns.size(), 1u);
  EXPECT_EQ(m->value_name(f, r0.returns[0]), "w1_new");
  int sends = 0;
  for (const RankOp& op : r0.ops) {
    if (f.ops[op.op].kind == OpKind::Send) {
      ++sends;
      EXPECT_EQ(op.peer, 1);
    }
    if (f.ops[op.op].kind == OpKind::Recv) {
      EXPECT_EQ(op.peer, 1);
    }
  }
  EXPECT_EQ(sends, 2);
}

TEST(Projection, CollectivesGetConcreteGroups) {
  SourceManager sm;
  DiagnosticEngine diags(sm);
  std::optional<Module> m = parse_golden(sm, diags, "hybrid_megatron.ir");
  ASSERT_TRUE(m.has_value());
  const Function& f = m->functions[0];
  RankProgram r2 = project_rank(*m, f, 2);  // world[pp=0, dp=1, tp=0]
  const RankOp* tp_reduce = nullptr;
  for (const RankOp& op : r2.ops) {
    if (f.ops[op.op].kind == OpKind::AllReduce && !tp_reduce) tp_reduce = &op;
  }
  ASSERT_NE(tp_reduce, nullptr);
  EXPECT_EQ(tp_reduce->group, (std::vector<Rank>{2, 3}));
  EXPECT_EQ(tp_reduce->group_index, 0);
}

TEST(Projection, AllRanksAtOnceEqualsEachRankAlone) {
  SourceManager sm;
  DiagnosticEngine diags(sm);
  std::optional<Module> m = parse_golden(sm, diags, "hybrid_megatron.ir");
  ASSERT_TRUE(m.has_value());
  const Function& f = m->functions[0];
  std::vector<RankProgram> all = project_ranks(*m, f);
  ASSERT_EQ(all.size(), static_cast<size_t>(m->mesh().size()));
  for (Rank r = 0; r < m->mesh().size(); ++r) {
    RankProgram alone = project_rank(*m, f, r);
    const RankProgram& together = all[static_cast<size_t>(r)];
    EXPECT_EQ(together.rank, r);
    EXPECT_EQ(together.args, alone.args);
    EXPECT_EQ(together.returns, alone.returns);
    ASSERT_EQ(together.ops.size(), alone.ops.size());
    for (size_t i = 0; i < alone.ops.size(); ++i) {
      EXPECT_EQ(together.ops[i].op, alone.ops[i].op);
      EXPECT_EQ(together.ops[i].group, alone.ops[i].group);
      EXPECT_EQ(together.ops[i].peer, alone.ops[i].peer);
    }
  }
}

TEST(DependencyGraph, CriticalPathFollowsTheHeaviestChain) {
  SourceManager sm;
  DiagnosticEngine diags(sm);
  std::optional<Module> m = parse_golden(sm, diags, "mlp_pipeline.ir");
  ASSERT_TRUE(m.has_value());
  const Function& f = m->functions[0];
  std::vector<OpId> order = topological_order(*m, f);
  ASSERT_EQ(order.size(), f.ops.size());
  std::vector<size_t> position(f.ops.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  for (OpId i = 0; i < f.ops.size(); ++i) {
    for (ValueId v : f.operands(f.ops[i])) {
      if (f.values[v].def != kNone) {
        EXPECT_LT(position[f.values[v].def], position[i]);
      }
    }
  }
  CriticalPath path = critical_path(*m, f);
  // x_1 @ w1 (1024) -> relu (32) -> send -> recv -> ar_1 @ w2 (256) -> relu (16)
  // -> ce_grad (64) -> relu_grad (16) -> dh2 @ w2^T (256) -> send -> recv
  // -> relu_grad (32) -> x_1^T @ dh1 (1024) -> add (128) -> sgd (384)
  EXPECT_DOUBLE_EQ(path.flops, 1024 + 32 + 256 + 16 + 64 + 16 + 256 + 32 + 1024 + 128 + 384);
  EXPECT_EQ(m->value_name(f, f.ops[path.ops.back()].first_result), "w1_new");
}

TEST(Memory, UnderTwoHundredBytesPerOp) {
  Module m;
  m.set_mesh(Mesh("world", {{"pp", 4}, {"dp", 8}}));
  Function& f = m.add_function("step");
  Builder b(m, f);
  DeviceSetId stage = m.intern_devices(DeviceSet{{{0, 1}, {0, 8}}, {}});
  ValueId w = b.add_arg("w", ArgKind::Param, TensorType(DType::BF16, {1024, 1024}), stage);
  ValueId x = b.add_arg("x", ArgKind::Input, TensorType(DType::BF16, {8, 1024}), stage);
  constexpr int kOps = 100000;
  for (int i = 0; i < kOps; ++i) {
    ValueId in[] = {x, w};
    OpSpec spec;
    spec.kind = OpKind::Matmul;
    spec.devices = stage;
    spec.operands = in;
    AttrValue attrs[] = {AttrValue::boolean("transpose_b", true)};
    spec.attrs = attrs;
    spec.meta.stage = 0;
    spec.meta.micro_batch = i % 8;
    spec.meta.phase = Phase::Forward;
    x = b.append_value(spec);
  }
  EXPECT_LT(static_cast<double>(m.memory_bytes()) / kOps, 200.0);
}

}  // namespace
}  // namespace dstc::ir
