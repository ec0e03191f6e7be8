// The checked forms the compiler builds on: models, strategies, searches.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/unit/frontend/frontend_test_util.h"

namespace dstc::frontend {
namespace {

const std::string kExamples = std::string(DSTC_SOURCE_DIR) + "/examples/";

NodeId node_at(const Model& m, const std::string& path) {
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    if (m.nodes[i].path == path) return static_cast<NodeId>(i);
  }
  return kNone;
}

TEST(ModelElaboration, Gpt2TreeOpsAndDims) {
  testing::Checked c = testing::check_paths({kExamples + "gpt2_megatron.dstrat"});
  ASSERT_FALSE(c.diags->has_errors()) << c.rendered();
  const CheckedStrategy* s = c.result->find_strategy("GPT2Megatron");
  ASSERT_NE(s, nullptr);
  const Model& m = *s->strategy.model;
  EXPECT_EQ(m.batch_dim, "b");
  EXPECT_EQ(m.batch, 64);
  NodeId blocks = node_at(m, "blocks");
  ASSERT_NE(blocks, kNone);
  EXPECT_EQ(m.nodes[blocks].kind, NodeKind::Repeat);
  EXPECT_EQ(m.nodes[blocks].children.size(), 12u);
  NodeId qkv = node_at(m, "blocks[3].attn.qkv");
  ASSERT_NE(qkv, kNone);
  const Node& leaf = m.nodes[qkv];
  EXPECT_EQ(leaf.kind, NodeKind::Layer);
  EXPECT_EQ(leaf.component, "Linear");
  ASSERT_EQ(leaf.params.size(), 2u);  // weight and bias
  EXPECT_EQ(m.tensors[leaf.params[0]].name, "blocks[3].attn.qkv.weight");
  EXPECT_EQ(m.tensors[leaf.params[0]].dims, (std::vector<Dim>{{"o", 2304}, {"h", 768}}));
  const Op& mm = m.ops[leaf.ops[0]];
  EXPECT_EQ(mm.kind, OpKind::Matmul);
  EXPECT_EQ(mm.inputs[0].dims, (std::vector<std::string>{"b", "s", "h"}));
  EXPECT_EQ(m.tensors[mm.output].dims, (std::vector<Dim>{{"b", 64}, {"s", 1024}, {"o", 2304}}));
  // The input comes from the block's first layer norm: data flow is explicit.
  const Tensor& in = m.tensors[mm.inputs[0].tensor];
  ASSERT_NE(in.producer, kNone);
  EXPECT_EQ(m.nodes[m.ops[in.producer].node].path, "blocks[3].ln1");
  // The residual add written in the module is a leaf of its own.
  NodeId res = node_at(m, "blocks[0].res1");
  ASSERT_NE(res, kNone);
  EXPECT_EQ(m.nodes[res].kind, NodeKind::Op);
  EXPECT_EQ(m.tensors[m.output].dims.size(), 0u);  // a scalar loss
}

TEST(StrategyElaboration, MegatronConfigs) {
  testing::Checked c = testing::check_paths({kExamples + "gpt2_megatron.dstrat"});
  ASSERT_FALSE(c.diags->has_errors()) << c.rendered();
  const Strategy& s = c.result->find_strategy("GPT2Megatron")->strategy;
  ASSERT_EQ(s.mesh.size(), 2u);
  EXPECT_EQ(s.mesh[1].name, "tp");
  EXPECT_EQ(s.devices(), 8);
  EXPECT_EQ(s.cluster.written, "clusters/dgx-a100.toml");
  EXPECT_FALSE(s.cluster.resolved.empty());
  EXPECT_EQ(s.run.optimizer, Optimizer::Adam);
  EXPECT_EQ(s.run.precision, ir::DType::BF16);
  const Model& m = *s.model;
  auto config_of = [&](const std::string& path) -> const ComputeConfig* {
    NodeId n = node_at(m, path);
    for (const ComputeConfig& cc : s.compute) {
      if (cc.leaf == n) return &cc;
    }
    return nullptr;
  };
  const ComputeConfig* fc2 = config_of("blocks[5].mlp.fc2");
  ASSERT_NE(fc2, nullptr);
  EXPECT_FALSE(fc2->from_default);
  EXPECT_EQ(fc2->selector, "**.mlp.fc2");
  EXPECT_EQ(fc2->sbp[1].kind, ir::Sbp::Split);
  EXPECT_EQ(fc2->sbp[1].dim, "h");
  const ComputeConfig* ln = config_of("blocks[5].ln2");
  ASSERT_NE(ln, nullptr);
  EXPECT_TRUE(ln->from_default);
  EXPECT_EQ(ln->sbp[0].dim, "b");
  EXPECT_EQ(ln->sbp[1].kind, ir::Sbp::Broadcast);
  ASSERT_EQ(s.ties.size(), 1u);
  EXPECT_EQ(s.ties[0].mode, ParamSharing::Replicate);
}

TEST(StrategyElaboration, PipelineAndScheduleAndOverrides) {
  testing::Checked c = testing::check_paths({kExamples + "gpt3_175b_megatron.dstrat"});
  ASSERT_FALSE(c.diags->has_errors()) << c.rendered();
  const Strategy& s = c.result->find_strategy("GPT3Megatron")->strategy;
  EXPECT_EQ(s.cluster.nodes, 128);
  EXPECT_EQ(s.devices(), 1024);
  ASSERT_TRUE(s.pipeline.present);
  EXPECT_EQ(s.pipeline.stages.size(), 16u);
  ASSERT_EQ(s.schedules.size(), 1u);
  EXPECT_EQ(s.schedules[0].kind, schedule::ScheduleKind::Interleaved);
  EXPECT_EQ(s.schedules[0].virtual_stages, 2);
  EXPECT_EQ(s.schedules[0].micro_batches, 192);
  EXPECT_EQ(s.model->batch, 1536);  // the train batch sized the model
  // Every leaf is in exactly one stage; the embedding is in the first.
  size_t placed = 0;
  for (const PipelineStage& st : s.pipeline.stages) placed += st.nodes.size();
  EXPECT_GT(placed, 96u);
  NodeId embed = node_at(*s.model, "embed");
  const auto& first = s.pipeline.stages[0].nodes;
  EXPECT_NE(std::find(first.begin(), first.end(), embed), first.end());
  // ZeRO-1 from the template: optimizer state of every parameter sharded.
  ASSERT_FALSE(s.memory.empty());
  EXPECT_EQ(s.memory[0].roles, kRoleOptimizer);
}

TEST(StrategyElaboration, DefinesOverrideParameters) {
  testing::Checked c = testing::check_paths({kExamples + "gpt2_3d_1f1b.dstrat"}, {"layers=4", "micro=4"});
  ASSERT_FALSE(c.diags->has_errors()) << c.rendered();
  const Strategy& s = c.result->find_strategy("GPT2ThreeD")->strategy;
  EXPECT_EQ(s.model->nodes[node_at(*s.model, "blocks")].children.size(), 4u);
  EXPECT_EQ(s.schedules[0].micro_batches, 4);
}

TEST(SearchElaboration, EnumeratesTheConstrainedGrid) {
  testing::Checked c = testing::check_paths({kExamples + "gpt2_search.dstrat"});
  ASSERT_FALSE(c.diags->has_errors()) << c.rendered();
  const SearchSpace* space = c.result->find_search("GPT2Sweep");
  ASSERT_NE(space, nullptr);
  EXPECT_EQ(space->grid_size, 5u * 4u * 3u * 7u);
  // dp * tp * pp == 16: 4 (pp 1) + 4 (pp 2) + 3 (pp 4) triples; micro >= pp.
  std::vector<std::vector<Value>> points;
  enumerate_search(*space, *c.diags, [&](const std::vector<Value>& p) {
    points.push_back(p);
    return true;
  });
  EXPECT_EQ(points.size(), 4u * 7u + 4u * 6u + 3u * 5u);
  // Points share elaborated models through the cache.
  ModelCache cache;
  size_t ok = 0;
  for (const auto& p : points) {
    DiagnosticEngine scratch(*c.sources);
    if (elaborate_search_point(*c.result->program, *space, p, 0, cache, scratch)) ++ok;
  }
  EXPECT_GT(ok, 0u);
  EXPECT_EQ(cache.size(), 1u);  // one batch size: one model
}

TEST(ClusterCheck, MeshLargerThanClusterIsReported) {
  testing::Checked c = testing::check_paths({kExamples + "gpt2_3d_1f1b.dstrat"});
  ASSERT_FALSE(c.diags->has_errors()) << c.rendered();
  const CheckedStrategy* s = c.result->find_strategy("GPT2ThreeD");
  check_against_cluster(*s, ClusterFacts{8, 16LL << 30}, *c.diags);
  ASSERT_EQ(c.diags->diagnostics().size(), 1u);
  const Diagnostic& d = c.diags->diagnostics()[0];
  EXPECT_EQ(d.kind.name, "cluster-too-small");
  EXPECT_NE(d.message.find("mesh needs 16 devices but the cluster has 8"), std::string::npos);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0].range, s->strategy.cluster.range);
  check_against_cluster(*s, ClusterFacts{16, 16LL << 30}, *c.diags);
  EXPECT_EQ(c.diags->diagnostics().size(), 1u);
}

}  // namespace
}  // namespace dstc::frontend
