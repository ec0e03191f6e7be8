// Faults planted in correctly compiled programs: verification must fail
// and name the op where the program goes wrong.
#include <gtest/gtest.h>

#include <sstream>

#include "backends/reference/verify.h"
#include "compiler/compile_strategy.h"
#include "ir/registry.h"
#include "tests/unit/compiler/test_models.h"

namespace dstc::reference {
namespace {

using compiler::LogicalGraph;
using compiler::StrategySpec;
using compiler::testing::make_mlp;
using compiler::testing::make_spec;
using compiler::testing::S;
using compiler::testing::set_compute;
using compiler::testing::set_default;

struct Programs {
  ir::Module distributed, single;
};

Programs compile_both(const LogicalGraph& g, const StrategySpec& spec) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  StrategySpec one = make_spec(g, {{"d", 1}}, spec.train.global_batch, 1);
  one.train = spec.train;
  auto dist = compiler::compile_strategy({g, spec}, sources, diags);
  auto single = compiler::compile_strategy({g, one}, sources, diags);
  EXPECT_TRUE(dist && single);
  return {dist ? std::move(dist->module) : ir::Module{}, single ? std::move(single->module) : ir::Module{}};
}

// Every use of `from` (operands and returns) reads `to` instead.
void replace_uses(ir::Function& f, ir::ValueId from, ir::ValueId to) {
  for (ir::ValueId& v : f.operand_pool)
    if (v == from) v = to;
  for (ir::ValueId& v : f.returns)
    if (v == from) v = to;
}

// Drops the first op matching `pick`: its users read its first operand.
std::optional<ir::OpId> bypass_first(ir::Function& f, const std::function<bool(const ir::Op&)>& pick) {
  for (ir::OpId id = 0; id < f.ops.size(); ++id) {
    if (!pick(f.ops[id])) continue;
    replace_uses(f, f.result(f.ops[id]), f.operands(f.ops[id])[0]);
    return id;
  }
  return std::nullopt;
}

// The first gradient all-reduce whose result the optimizer reads.
std::function<bool(const ir::Op&)> gradient_all_reduce_read_by_optimizer(const ir::Function& f) {
  return [&f](const ir::Op& op) {
    if (op.kind != ir::OpKind::AllReduce || op.phase != ir::Phase::WeightGrad) return false;
    for (const ir::Op& reader : f.ops) {
      if (ir::op_info(reader.kind).category != ir::OpCategory::Optimizer) continue;
      for (ir::ValueId v : f.operands(reader))
        if (v == f.result(op)) return true;
    }
    return false;
  };
}

std::string report(const VerifyResult& r) {
  std::ostringstream out;
  print_verify_result(out, r);
  return out.str();
}

// An MLP with a tensor-parallel pair of layers (column then row parallel),
// data parallelism, two micro-batches and a two-stage pipeline.
Programs mlp_programs(bool pipeline) {
  auto mlp = make_mlp(4, 16, 16, 4);
  StrategySpec spec = pipeline ? make_spec(mlp.graph, {{"pp", 2}, {"dp", 2}}, 16, 2)
                               : make_spec(mlp.graph, {{"dp", 2}, {"tp", 2}}, 16, 2);
  set_default(spec, pipeline ? 1 : 0, S("b"));
  if (pipeline) {
    spec.pipeline.axis = 0;
    spec.pipeline.node = mlp.layers_node;
  } else {
    set_compute(spec, mlp.fc_nodes[0], 1, S("o"));
    set_compute(spec, mlp.fc_nodes[1], 1, S("h"));
  }
  return compile_both(mlp.graph, spec);
}

TEST(PlantedFault, TheCorrectProgramsVerify) {
  for (bool pipeline : {false, true}) {
    Programs p = mlp_programs(pipeline);
    VerifyResult r = compare_programs(p.distributed, p.single, {});
    EXPECT_TRUE(r.passed) << report(r);
  }
}

TEST(PlantedFault, RemovedForwardAllReduceIsAPartialRead) {
  Programs p = mlp_programs(false);
  ir::Function& f = p.distributed.functions[0];
  auto removed = bypass_first(
      f, [](const ir::Op& op) { return op.kind == ir::OpKind::AllReduce && op.phase == ir::Phase::Forward; });
  ASSERT_TRUE(removed);
  VerifyResult r = compare_programs(p.distributed, p.single, {});
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.problem) << report(r);
  EXPECT_EQ(r.problem->kind, ExecutionProblem::PartialRead) << report(r);
  // The first reader of the partial sum: the ReLU after the row-parallel layer.
  EXPECT_NE(r.at.op_text.find("relu"), std::string::npos) << report(r);
  EXPECT_NE(r.problem->message.find("partial"), std::string::npos);
  EXPECT_NE(r.problem->message.find("tp"), std::string::npos);
}

TEST(PlantedFault, RemovedGradientAllReduceIsReadAsWholeByTheOptimizer) {
  Programs p = mlp_programs(false);
  ir::Function& f = p.distributed.functions[0];
  auto removed = bypass_first(f, gradient_all_reduce_read_by_optimizer(f));
  ASSERT_TRUE(removed);
  VerifyResult r = compare_programs(p.distributed, p.single, {});
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.problem) << report(r);
  EXPECT_EQ(r.problem->kind, ExecutionProblem::PartialRead) << report(r);
  EXPECT_NE(r.at.op_text.find("adam"), std::string::npos) << report(r);
}

// The kind of the diagnostic `dstc verify` reports for a result.
std::string diagnostic_kind(const VerifyResult& r) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  report_verify_failure(r, diags);
  return diags.diagnostics().size() == 1 ? std::string(diags.diagnostics()[0].kind.name) : "";
}

TEST(PlantedFault, AMislabelledReductionIsALayoutMismatch) {
  Programs p = mlp_programs(false);
  ir::Function& f = p.distributed.functions[0];
  // The forward all-reduce's result declared partial on tp: it is whole.
  for (const ir::Op& op : f.ops) {
    if (op.kind != ir::OpKind::AllReduce || op.phase != ir::Phase::Forward) continue;
    ir::Value& v = f.values[f.result(op)];
    ir::Layout layout = p.distributed.layout(v.layout);
    layout[1] = ir::Sbp{ir::Sbp::PartialSum, 0};
    v.layout = p.distributed.intern_layout(layout);
    break;
  }
  VerifyResult r = compare_programs(p.distributed, p.single, {});
  ASSERT_TRUE(r.problem) << report(r);
  EXPECT_EQ(r.problem->kind, ExecutionProblem::LayoutMismatch) << report(r);
  EXPECT_NE(r.at.op_text.find("all_reduce"), std::string::npos) << report(r);
  EXPECT_EQ(diagnostic_kind(r), "verify-layout-mismatch");
}

TEST(PlantedFault, EachFailureIsReportedWithItsKind) {
  Programs p = mlp_programs(false);
  Programs q = mlp_programs(false);
  ASSERT_TRUE(bypass_first(p.distributed.functions[0], [](const ir::Op& op) {
    return op.kind == ir::OpKind::AllReduce && op.phase == ir::Phase::Forward;
  }));
  EXPECT_EQ(diagnostic_kind(compare_programs(p.distributed, p.single, {})), "verify-partial-read");
  ASSERT_TRUE(
      bypass_first(q.distributed.functions[0], [](const ir::Op& op) { return op.kind == ir::OpKind::Accumulate; }));
  EXPECT_EQ(diagnostic_kind(compare_programs(q.distributed, q.single, {})), "verify-mismatch");
  Programs ok = mlp_programs(false);
  EXPECT_EQ(diagnostic_kind(compare_programs(ok.distributed, ok.single, {})), "");
}

TEST(PlantedFault, RemovedAllReduceWithoutLayoutChecksIsAWrongUpdate) {
  Programs p = mlp_programs(false);
  ir::Function& f = p.distributed.functions[0];
  ASSERT_TRUE(bypass_first(f, gradient_all_reduce_read_by_optimizer(f)));
  VerifyOptions options;
  options.check_layouts = false;
  VerifyResult r = compare_programs(p.distributed, p.single, options);
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.difference) << report(r);
  // Gathered over dp, the partial gradient is still the gradient; the
  // optimizer step that reads it as whole is what goes wrong.
  EXPECT_NE(r.difference->tensor.find("updated "), std::string::npos) << report(r);
  EXPECT_NE(r.difference->producer.op_text.find("adam"), std::string::npos) << report(r);
}

TEST(PlantedFault, SwappedMicroBatchesOnASendChangeTheLoss) {
  Programs p = mlp_programs(true);
  ir::Function& f = p.distributed.functions[0];
  std::vector<ir::OpId> sends;
  for (ir::OpId id = 0; id < f.ops.size(); ++id)
    if (f.ops[id].kind == ir::OpKind::Send && f.ops[id].phase == ir::Phase::Forward) sends.push_back(id);
  ASSERT_GE(sends.size(), 2u);
  ASSERT_NE(f.ops[sends[0]].micro_batch, f.ops[sends[1]].micro_batch);
  std::swap(f.operand_pool[f.ops[sends[0]].operand_begin], f.operand_pool[f.ops[sends[1]].operand_begin]);
  VerifyResult r = compare_programs(p.distributed, p.single, {});
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.difference) << report(r);
  EXPECT_FALSE(r.difference->producer.op_text.empty());
}

TEST(PlantedFault, DroppedGradientAccumulationIsAWrongGradient) {
  Programs p = mlp_programs(false);
  ir::Function& f = p.distributed.functions[0];
  auto dropped = bypass_first(f, [](const ir::Op& op) { return op.kind == ir::OpKind::Accumulate; });
  ASSERT_TRUE(dropped);
  VerifyResult r = compare_programs(p.distributed, p.single, {});
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.difference) << report(r);
  EXPECT_EQ(r.difference->tensor.rfind("gradient of ", 0), 0u) << report(r);
  EXPECT_GT(r.difference->error, 1e-2);
}

}  // namespace
}  // namespace dstc::reference
