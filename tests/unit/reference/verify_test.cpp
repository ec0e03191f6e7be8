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
  std::optional<compiler::CompiledStrategy> c = compiler::compile_strategy({g, spec}, sources, diags);
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
  return compare_programs(*dist, *one, options);
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

namespace dstc::reference {
namespace {

using compiler::TensorKind;
using compiler::testing::ModelBuilder;
using ops::OpKind;

// x[b, c, h] -> a linear over c -> batch norm over its output channels ->
// ReLU -> a classifier over (o, h) -> cross-entropy.
LogicalGraph make_batchnorm_model(int64_t batch) {
  ModelBuilder m;
  int32_t x = m.input("x", {{"b", batch}, {"c", 4}, {"h", 6}});
  int32_t labels = m.input("labels", {{"b", batch}}, ir::DType::I32, TensorKind::Input);
  m.graph.tensors[x].batch_axis = 0;
  m.graph.tensors[labels].batch_axis = 0;
  int32_t fc = m.node(0, "fc", "Linear");
  int32_t w = m.param(fc, "weight", {{"o", 8}, {"c", 4}});
  int32_t y = m.op(fc, ops::OpKind::Einsum, {{x, {"b", "c", "h"}}, {w, {"o", "c"}}}, {"b", "o", "h"});
  int32_t bn = m.node(0, "bn", "BatchNorm");
  int32_t gamma = m.param(bn, "gamma", {{"o", 8}}), beta = m.param(bn, "beta", {{"o", 8}});
  int32_t z = m.op(bn, ops::OpKind::BatchNorm, {{y, {"b", "o", "h"}}, {gamma, {"o"}}, {beta, {"o"}}}, {"b", "o", "h"});
  int32_t act = m.node(0, "act", "ReLU");
  int32_t r = m.op(act, ops::OpKind::Relu, {{z, {"b", "o", "h"}}}, {"b", "o", "h"});
  int32_t head = m.node(0, "head", "Linear");
  int32_t wh = m.param(head, "weight", {{"k", 5}, {"o", 8}, {"h", 6}});
  int32_t logits = m.op(head, ops::OpKind::Einsum, {{r, {"b", "o", "h"}}, {wh, {"k", "o", "h"}}}, {"b", "k"});
  int32_t loss = m.node(0, "loss", "CrossEntropy");
  m.graph.loss = m.op(loss, ops::OpKind::CrossEntropy, {{logits, {"b", "k"}}, {labels, {"b"}}}, {});
  m.graph.infer_batch_axes();
  return std::move(m.graph);
}

// The single-device program of `g` with the batch in `micro` micro-batches.
std::optional<ir::Module> single_device(const LogicalGraph& g, int64_t batch, int32_t micro) {
  return compile(g, make_spec(g, {{"d", 1}}, batch, micro));
}

TEST(Verify, ReferenceRunsInMicroBatchesOnlyWithBatchNorm) {
  std::optional<ir::Module> mlp = single_device(make_mlp(2, 8, 16, 4).graph, 8, 4);
  std::optional<ir::Module> gpt = single_device(make_gpt(1, 4, 8, 16, 4, 32).graph, 4, 2);
  std::optional<ir::Module> batch_norm = single_device(make_batchnorm_model(8), 8, 4);
  ASSERT_TRUE(mlp && gpt && batch_norm);
  EXPECT_EQ(reference_micro_batches(*mlp, 4), 1);
  EXPECT_EQ(reference_micro_batches(*gpt, 2), 1);
  EXPECT_EQ(reference_micro_batches(*batch_norm, 4), 4);
  EXPECT_EQ(reference_micro_batches(*batch_norm, 1), 1);
}

// Without batch norm the model's function does not depend on how the batch
// is cut: the single-device program in 4 micro-batches (gradients
// accumulated) matches the whole batch, so either is a valid reference.
TEST(Verify, MicroBatchedReferenceMatchesWholeBatchWithoutBatchNorm) {
  auto mlp = make_mlp(3, 16, 16, 4);
  auto gpt = make_gpt(2, 8, 8, 16, 4, 32);
  for (const LogicalGraph* g : {&mlp.graph, &gpt.graph}) {
    int64_t batch = g == &mlp.graph ? 16 : 8;
    std::optional<ir::Module> micro = single_device(*g, batch, 4), whole = single_device(*g, batch, 1);
    ASSERT_TRUE(micro && whole);
    VerifyOptions f64;
    f64.arithmetic = Arithmetic::F64;
    VerifyResult r = compare_programs(*micro, *whole, f64);
    EXPECT_TRUE(r.passed) << report(r);
    EXPECT_LT(r.worst_error, 1e-12) << report(r);
    EXPECT_GT(r.tensors_compared, 5u);
  }
}

// With batch norm the statistics are per micro-batch: the whole-batch
// program is another function, and a strategy in 4 micro-batches matches
// only the reference in 4 micro-batches.
TEST(Verify, BatchNormUnderMicroBatchingMatchesTheMicroBatchedReference) {
  LogicalGraph g = make_batchnorm_model(16);
  StrategySpec spec = make_spec(g, {{"dp", 2}}, 16, 4);
  set_default(spec, 0, S("b"));
  std::optional<ir::Module> dist = compile(g, spec), micro = single_device(g, 16, 4), whole = single_device(g, 16, 1);
  ASSERT_TRUE(dist && micro && whole);
  VerifyResult against_micro = compare_programs(*dist, *micro, {});
  EXPECT_TRUE(against_micro.passed) << report(against_micro);
  VerifyResult against_whole = compare_programs(*dist, *whole, {});
  EXPECT_FALSE(against_whole.passed);
  ASSERT_TRUE(against_whole.difference.has_value()) << report(against_whole);
  EXPECT_EQ(against_whole.difference->tensor, "loss");
}

}  // namespace
}  // namespace dstc::reference
