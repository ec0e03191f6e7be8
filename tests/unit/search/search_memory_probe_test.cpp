#include <gtest/gtest.h>

#include <map>

#include "compiler/compile_strategy.h"
#include "compiler/frontend/frontend.h"
#include "compiler/logical/build_logical_graph.h"
#include "compiler/lowering/lowering.h"
#include "compiler/search/memory_probe.h"
#include "ir/printer.h"

namespace dstc::search {
namespace {

// Beside the search goldens, so that the model import and the cluster resolve.
const std::string kPath = std::string(DSTC_SOURCE_DIR) + "/tests/golden/search/probe_test.dstrat";
const std::string kStrategies = R"(
import "models/gpt2.dstrat"

strategy OneF(pp = 2, micro = 4, batch = 16) for GPT2(hidden = 64, heads = 2, layers = 4, vocab = 256, seq = 16) on "tiny-cluster.toml" {
  mesh [pp: pp, tp: 2]
  train { batch = batch, optimizer = adam, precision = fp32 }
  schedule { micro_batches = micro, kind = 1f1b }
  pipeline blocks over pp
  **.mlp.fc1 compute [tp: S(o)]
  **.mlp.fc2 compute [tp: S(h)]
}

strategy GPipe(pp = 2, micro = 4, batch = 16) for GPT2(hidden = 64, heads = 2, layers = 4, vocab = 256, seq = 16) on "tiny-cluster.toml" {
  mesh [pp: pp, tp: 2]
  train { batch = batch, optimizer = adam, precision = fp32 }
  schedule { micro_batches = micro, kind = gpipe }
  pipeline blocks over pp
}

strategy Interleaved(pp = 2, micro = 8, batch = 16) for GPT2(hidden = 64, heads = 2, layers = 4, vocab = 256, seq = 16) on "tiny-cluster.toml" {
  mesh [pp: pp]
  train { batch = batch, optimizer = adam, precision = fp32 }
  schedule { micro_batches = micro, kind = interleaved(2) }
  pipeline blocks over pp
}
)";

struct Planned {
  SourceManager sources;
  std::unique_ptr<DiagnosticEngine> diags = std::make_unique<DiagnosticEngine>(sources);
  std::unique_ptr<frontend::FrontendResult> front;
  std::optional<compiler::LogicalProgram> logical;
  std::optional<compiler::PlannedStrategy> planned;
};

std::unique_ptr<Planned> plan(const std::string& strategy, const std::vector<std::string>& defines) {
  auto p = std::make_unique<Planned>();
  p->front = frontend::check_text(kPath, kStrategies, defines, p->sources, *p->diags);
  const frontend::CheckedStrategy* s = p->front->find_strategy(strategy);
  EXPECT_NE(s, nullptr);
  if (!s) return p;
  p->logical = compiler::build_logical_program(s->strategy, *p->diags);
  if (p->logical) p->planned = compiler::plan_strategy(*p->logical, p->sources, *p->diags);
  EXPECT_FALSE(p->diags->has_errors());
  return p;
}

htae::ClusterSpec cluster_with_memory(SourceManager& sources, int64_t bytes) {
  DiagnosticEngine diags(sources);
  std::optional<htae::ClusterSpec> cluster =
      htae::load_cluster(sources, diags, std::string(DSTC_SOURCE_DIR) + "/tests/golden/search/tiny-cluster.toml", {});
  EXPECT_TRUE(cluster);
  cluster->gpu.memory_bytes = bytes;
  return *cluster;
}

TEST(SearchMemoryProbe, FewestMicroBatchesIsOneOrThePipelineRanksForInterleaved) {
  auto one_f = plan("OneF", {});
  ASSERT_TRUE(one_f->planned);
  EXPECT_EQ(fewest_micro_batches(one_f->planned->resolved), 1);
  auto interleaved = plan("Interleaved", {});
  ASSERT_TRUE(interleaved->planned);
  EXPECT_EQ(fewest_micro_batches(interleaved->planned->resolved), 2);
  // Already the fewest: the configuration is its own probe.
  auto single = plan("OneF", {"micro=1"});
  ASSERT_TRUE(single->planned);
  EXPECT_EQ(fewest_micro_batches(single->planned->resolved), std::nullopt);
  auto ranks = plan("Interleaved", {"micro=2"});
  ASSERT_TRUE(ranks->planned);
  EXPECT_EQ(fewest_micro_batches(ranks->planned->resolved), std::nullopt);
}

// 1F1B runs pp - rank forwards before a rank's first backward, GPipe all.
TEST(SearchMemoryProbe, MicroBatchesHeldFollowTheSchedule) {
  auto one_f = plan("OneF", {"micro=4"});
  ASSERT_TRUE(one_f->planned);
  compiler::CompiledStrategy compiled = compiler::lower_planned(std::move(*one_f->planned), one_f->sources);
  const ir::Module& module = compiled.module;
  // Mesh [pp: 2, tp: 2]: ranks 0 and 1 are pipeline rank 0, 2 and 3 rank 1.
  EXPECT_EQ(micro_batches_held(module, compiled.resolved, one_f->logical->spec.pipeline.axis),
            (std::vector<int64_t>{2, 2, 1, 1}));
  auto gpipe = plan("GPipe", {"micro=4"});
  ASSERT_TRUE(gpipe->planned);
  EXPECT_EQ(micro_batches_held(module, gpipe->planned->resolved, gpipe->logical->spec.pipeline.axis),
            (std::vector<int64_t>{4, 4, 4, 4}));
}

// The probe is the configuration with one micro-batch of the same size:
// its bound is that configuration's, compiled on its own.
TEST(SearchMemoryProbe, BoundIsTheBoundOfTheSameMicroBatchesCompiledAlone) {
  auto whole = plan("OneF", {"micro=4", "batch=16"});
  ASSERT_TRUE(whole->planned);
  auto alone = plan("OneF", {"micro=1", "batch=4"});
  ASSERT_TRUE(alone->planned);
  ir::Module alone_module = compiler::lower_planned(std::move(*alone->planned), alone->sources).module;
  htae::ClusterSpec no_memory = cluster_with_memory(whole->sources, 0);
  // As many micro-batches held as the whole configuration's schedule holds.
  std::optional<htae::MemoryLowerBound> expected =
      memory_bound_exceeding(alone_module, whole->planned->resolved, whole->logical->spec.pipeline.axis, no_memory);
  ASSERT_TRUE(expected);
  std::optional<htae::MemoryLowerBound> probed =
      memory_bound_exceeding(*whole->logical, *whole->planned, 1, no_memory, whole->sources);
  ASSERT_TRUE(probed);
  EXPECT_EQ(probed->bytes, expected->bytes);
  EXPECT_GT(probed->bytes, 0);
  // A device that holds the bound exactly: nothing to report.
  htae::ClusterSpec enough = cluster_with_memory(whole->sources, probed->bytes);
  EXPECT_EQ(memory_bound_exceeding(*whole->logical, *whole->planned, 1, enough, whole->sources), std::nullopt);
}

// The probe is a plan option: the first micro-batches of the strategy's
// size run, and the program is left as it is.
TEST(SearchMemoryProbe, RunsFewerMicroBatchesOfTheSameSize) {
  auto p = plan("Interleaved", {});
  ASSERT_TRUE(p->planned);
  compiler::PlanOptions probe;
  probe.micro_batches_run = 2;
  DiagnosticEngine diags(p->sources);
  auto resolved = compiler::resolve_strategy(p->logical->graph, p->logical->spec, p->sources, diags, probe);
  ASSERT_TRUE(resolved);
  EXPECT_EQ(resolved->micro_batches, 2);
  EXPECT_EQ(resolved->batch_splits, 8);
  ir::Module fewer = compiler::lower_to_ir({&*p->logical, *resolved, p->planned->sbp}, p->sources);
  ir::Module all = compiler::lower_planned(std::move(*p->planned), p->sources).module;
  auto inputs = [](const ir::Module& m) {
    std::map<std::string, std::string> out;  // micro-batch input -> its type
    const ir::Function& f = m.functions.front();
    for (const ir::Arg& a : f.args)
      if (a.kind == ir::ArgKind::Input) out[m.value_name(f, a.value)] = ir::to_string(m.value_type(f, a.value));
    return out;
  };
  std::map<std::string, std::string> few = inputs(fewer), every = inputs(all);
  EXPECT_EQ(few.size() * 4, every.size());
  for (const auto& [name, type] : few) EXPECT_EQ(type, every[name]) << name;
}

}  // namespace
}  // namespace dstc::search
