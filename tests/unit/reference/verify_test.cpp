// Verification of compiled strategies against the single-device model.
#include <gtest/gtest.h>

#include <sstream>

#include "backends/reference/verify.h"
#include "compiler/compile_strategy.h"
#include "tests/unit/compiler/test_models.h"

namespace dstc::reference {
namespace {

using compiler::LogicalGraph;
using compiler::StrategySpec;
using compiler::testing::make_gpt;
using compiler::testing::make_mlp;
using compiler::testing::make_spec;
using compiler::testing::S;
using compiler::testing::set_compute;
using compiler::testing::set_default;

std::optional<ir::Module> compile(const LogicalGraph& g, const StrategySpec& spec) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<compiler::CompiledStrategy> c = compiler::compile_strategy(g, spec, sources, diags);
  std::string text;
  for (const Diagnostic& d : diags.diagnostics()) text += diags.render(d, false);
  EXPECT_TRUE(c.has_value()) << text;
  if (!c) return std::nullopt;
  return std::move(c->module);
}

VerifyResult verify(const LogicalGraph& g, const StrategySpec& spec, VerifyOptions options = {}) {
  StrategySpec single = make_spec(g, {{"d", 1}}, spec.train.global_batch, 1);
  single.train = spec.train;
  std::optional<ir::Module> dist = compile(g, spec), one = compile(g, single);
  if (!dist || !one) return {};
  return compare_programs(g, *dist, *one, options);
}

std::string report(const VerifyResult& r) {
  std::ostringstream out;
  print_verify_result(out, r);
  return out.str();
}

TEST(Verify, SingleDeviceMatchesItself) {
  auto mlp = make_mlp(2, 8, 16, 4);
  VerifyResult r = verify(mlp.graph, make_spec(mlp.graph, {{"dp", 1}}, 8));
  EXPECT_TRUE(r.passed) << report(r);
  EXPECT_EQ(r.worst_error, 0) << report(r);
}

TEST(Verify, DataParallelMlpMatches) {
  auto mlp = make_mlp(3, 16, 16, 4);
  StrategySpec spec = make_spec(mlp.graph, {{"dp", 4}}, 16, 2);
  set_default(spec, 0, S("b"));
  VerifyResult r = verify(mlp.graph, spec);
  EXPECT_TRUE(r.passed) << report(r);
}

}  // namespace
}  // namespace dstc::reference

namespace dstc::reference {
namespace {

StrategySpec megatron(const compiler::testing::Gpt& gpt, int dp, int tp, int64_t batch, int32_t micro = 1) {
  StrategySpec spec = make_spec(gpt.graph, {{"dp", dp}, {"tp", tp}}, batch, micro);
  set_default(spec, 0, S("b"));
  for (const compiler::testing::Gpt::Block& b : gpt.blocks) {
    for (int32_t n : {b.q, b.k, b.v, b.attn, b.proj}) set_compute(spec, n, 1, S("n"));
    for (int32_t n : {b.fc1, b.act, b.fc2}) set_compute(spec, n, 1, S("f"));
  }
  return spec;
}

TEST(Verify, MegatronGptMatches) {
  auto gpt = make_gpt(2, 4, 8, 16, 4, 32);
  VerifyResult r = verify(gpt.graph, megatron(gpt, 2, 2, 4, 2));
  EXPECT_TRUE(r.passed) << report(r);
  EXPECT_GT(r.tensors_compared, 50u);
}

TEST(Verify, PipelinedMlpMatches) {
  auto mlp = make_mlp(4, 16, 32, 8);
  StrategySpec spec = make_spec(mlp.graph, {{"pp", 2}, {"dp", 2}}, 16, 4);
  set_default(spec, 1, S("b"));
  spec.pipeline.axis = 0;
  spec.pipeline.node = mlp.layers_node;
  VerifyResult r = verify(mlp.graph, spec);
  EXPECT_TRUE(r.passed) << report(r);
}

}  // namespace
}  // namespace dstc::reference
