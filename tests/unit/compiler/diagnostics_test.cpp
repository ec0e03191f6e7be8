// Compiler diagnostics reached through the compiler's API (the front end
// reports the same mistakes first for .dstrat input; search and tests call
// the compiler directly).
#include <gtest/gtest.h>

#include "compiler/compile_strategy.h"
#include "tests/unit/compiler/test_models.h"

namespace dstc::compiler {
namespace {

std::string first_kind(const LogicalGraph& g, const StrategySpec& spec) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  EXPECT_FALSE(compile_strategy({g, spec}, sources, diags).has_value());
  return diags.diagnostics().empty() ? "" : std::string(diags.diagnostics().front().kind.name);
}

TEST(CompilerDiagnostics, MicroBatchesThatDoNotDivideTheBatch) {
  auto mlp = testing::make_mlp(2, 8, 16, 4);
  EXPECT_EQ(first_kind(mlp.graph, testing::make_spec(mlp.graph, {{"dp", 1}}, 8, 3)), "micro-batches");
}

TEST(CompilerDiagnostics, ScheduleTableThatCannotBeRead) {
  auto mlp = testing::make_mlp(2, 8, 16, 4);
  StrategySpec spec = testing::make_spec(mlp.graph, {{"pp", 2}}, 8, 2);
  spec.pipeline = {0, mlp.layers_node, {}, {}};
  ScheduleConfig table;
  table.table = "/nonexistent/schedule.csv";
  spec.schedule[mlp.layers_node] = table;
  EXPECT_EQ(first_kind(mlp.graph, spec), "schedule-table-unreadable");
}

TEST(CompilerDiagnostics, PipelineWithMoreStagesThanLayers) {
  auto mlp = testing::make_mlp(2, 8, 16, 4);
  StrategySpec spec = testing::make_spec(mlp.graph, {{"pp", 4}}, 8, 4);
  spec.pipeline = {0, mlp.layers_node, {}, {}};
  EXPECT_EQ(first_kind(mlp.graph, spec), "pipeline-too-few-layers");
}

}  // namespace
}  // namespace dstc::compiler
