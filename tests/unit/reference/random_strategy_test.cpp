// Property: random small MLPs and transformer blocks under random legal
// strategies (SBP per layer, data / tensor / pipeline degrees,
// micro-batches, ZeRO stage, recomputation, schedule kind) compute what the
// single-device model computes.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include <fmt/format.h>

#include "backends/reference/verify.h"
#include "compiler/compile_strategy.h"
#include "tests/unit/compiler/test_models.h"

namespace dstc::reference {
namespace {

using compiler::AxisCompute;
using compiler::LogicalGraph;
using compiler::StrategySpec;
using compiler::TensorKind;
using compiler::testing::S;
using compiler::testing::set_compute;
using compiler::testing::set_default;
using schedule::ScheduleKind;

struct Case {
  LogicalGraph graph;
  StrategySpec spec;
  std::string description;
};

int pick(std::mt19937& rng, std::initializer_list<int> choices) {
  return *(choices.begin() + std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng));
}

Case random_case(std::mt19937& rng) {
  const bool gpt = pick(rng, {0, 1}) == 1;
  const int pp = pick(rng, {1, 1, 2}), dp = pick(rng, {1, 2}), tp = pick(rng, {1, 2});
  const int micro = pp > 1 ? pick(rng, {2, 4}) : pick(rng, {1, 2});
  const int zero = dp > 1 ? pick(rng, {0, 1, 2, 3}) : 0;
  const bool recompute = pick(rng, {0, 1}) == 1;
  const int64_t batch = int64_t{dp} * micro * pick(rng, {1, 2});
  Case c;
  std::vector<ir::MeshAxis> axes;
  if (pp > 1) axes.push_back({"pp", pp});
  axes.push_back({"dp", dp});
  axes.push_back({"tp", tp});
  const int dp_axis = pp > 1 ? 1 : 0, tp_axis = dp_axis + 1;
  int32_t repeated = -1;
  std::string layers_text;
  std::vector<std::function<void(StrategySpec&)>> compute;
  if (gpt) {
    const int layers = pp > 1 ? pick(rng, {2, 4}) : pick(rng, {1, 2});
    auto g = compiler::testing::make_gpt(layers, batch, 4, 8, 2, 16);
    repeated = g.blocks_node;
    for (const auto& b : g.blocks) {
      int style = pick(rng, {0, 1, 2});  // replicated, Megatron, Megatron attention only
      layers_text += style == 0 ? "B" : style == 1 ? "M" : "A";
      compute.push_back([b, style, tp_axis](StrategySpec& s) {
        if (style == 0) return;
        for (int32_t n : {b.q, b.k, b.v, b.attn, b.proj}) set_compute(s, n, tp_axis, S("n"));
        if (style == 1)
          for (int32_t n : {b.fc1, b.act, b.fc2}) set_compute(s, n, tp_axis, S("f"));
      });
    }
    c.graph = std::move(g.graph);
  } else {
    const int layers = pp > 1 ? pick(rng, {2, 4}) : pick(rng, {1, 2, 3});
    auto m = compiler::testing::make_mlp(layers, batch, 8, 4);
    repeated = m.layers_node;
    for (int32_t fc : m.fc_nodes) {
      int style = pick(rng, {0, 1, 2});  // replicated, column parallel, row parallel
      layers_text += style == 0 ? "B" : style == 1 ? "o" : "h";
      compute.push_back([fc, style, tp_axis](StrategySpec& s) {
        if (style != 0) set_compute(s, fc, tp_axis, S(style == 1 ? "o" : "h"));
      });
    }
    c.graph = std::move(m.graph);
  }
  c.spec = compiler::testing::make_spec(c.graph, axes, batch, micro);
  set_default(c.spec, dp_axis, S("b"));
  for (auto& f : compute) f(c.spec);
  ScheduleKind kind = ScheduleKind::OneFOneB;
  compiler::ScheduleConfig sc;
  sc.recompute = recompute;
  if (pp > 1) {
    c.spec.pipeline.axis = 0;
    c.spec.pipeline.node = repeated;
    kind = static_cast<ScheduleKind>(pick(rng, {0, 1, 2, 3}));
    int layers = static_cast<int>(c.graph.nodes[repeated].children.size());
    if (kind == ScheduleKind::Interleaved && layers < 4) kind = ScheduleKind::GPipe;
    sc.kind = kind;
    if (kind == ScheduleKind::Interleaved) sc.virtual_stages = 2;
  }
  c.spec.schedule[repeated] = sc;
  if (zero > 0) {
    for (size_t t = 0; t < c.graph.tensors.size(); ++t) {
      if (c.graph.tensors[t].kind != TensorKind::Param) continue;
      ir::Layout layout(axes.size());
      layout[static_cast<size_t>(dp_axis)] = ir::Sbp{ir::Sbp::Split, 0};
      compiler::TensorLayoutConfig sharded{layout, {}};
      c.spec.memory[t].optimizer = sharded;
      if (zero >= 2) c.spec.memory[t].grad = sharded;
      if (zero >= 3) c.spec.memory[t].value = sharded;
    }
  }
  c.description = fmt::format("{} layers={} pp={} dp={} tp={} micro={} batch={} zero={} recompute={} schedule={}",
                              gpt ? "gpt" : "mlp", layers_text, pp, dp, tp, micro, batch, zero, recompute,
                              schedule::schedule_kind_name(kind));
  return c;
}

TEST(RandomStrategies, AHundredVerify) {
  std::mt19937 rng(20240607);
  int compiled = 0;
  for (int i = 0; i < 100; ++i) {
    Case c = random_case(rng);
    SourceManager sources;
    DiagnosticEngine diags(sources);
    auto dist = compiler::compile_strategy({c.graph, c.spec}, sources, diags);
    if (!dist) continue;  // an illegal combination the compiler rejects
    ++compiled;
    StrategySpec one = compiler::testing::make_spec(c.graph, {{"d", 1}}, c.spec.train.global_batch, 1);
    auto single = compiler::compile_strategy({c.graph, one}, sources, diags);
    ASSERT_TRUE(single) << c.description;
    VerifyResult r = compare_programs(dist->module, single->module, {});
    std::ostringstream out;
    print_verify_result(out, r);
    EXPECT_TRUE(r.passed) << "case " << i << ": " << c.description << "\n" << out.str();
  }
  EXPECT_GE(compiled, 80);
}

}  // namespace
}  // namespace dstc::reference
