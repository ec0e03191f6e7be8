// The load-balancing losses of a top_k (aux_loss over each micro-batch,
// seq_aux_loss over each sequence): their gradient, run by the reference
// executor, against the formula worked out here by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "backends/reference/argument_values.h"
#include "backends/reference/executor.h"
#include "backends/reference/returned_values.h"
#include "backends/reference/verify.h"
#include "compiler/compile_strategy.h"
#include "tests/unit/compiler/test_models.h"

namespace dstc::reference {
namespace {

using compiler::LogicalGraph;
using compiler::TensorKind;
using compiler::testing::make_spec;
using compiler::testing::ModelBuilder;

constexpr int64_t kBatch = 4, kSeq = 3, kExperts = 4, kTopK = 2;
constexpr double kAuxLoss = 0.3;

// scores = x[b, s, e] · w[e], gates = top_k(scores, k = 2, aux_loss), and a
// loss that reads the gates scaled by 0: the only gradient w gets is the
// load-balancing loss's.
LogicalGraph make_router(bool per_sequence) {
  ModelBuilder m;
  int32_t x = m.input("x", {{"b", kBatch}, {"s", kSeq}, {"e", kExperts}});
  int32_t target = m.input("target", {{"b", kBatch}, {"s", kSeq}, {"e", kExperts}});
  m.graph.tensors[x].batch_axis = 0;
  m.graph.tensors[target].batch_axis = 0;
  int32_t router = m.node(0, "router", "Router");
  int32_t w = m.param(router, "w", {{"e", kExperts}});
  const std::vector<std::string> dims{"b", "s", "e"};
  int32_t scores = m.op(router, ops::OpKind::Mul, {{x, dims}, {w, {"e"}}}, dims, "scores");
  int32_t gates = m.op(router, ops::OpKind::TopK, {{scores, dims}}, dims, "gates");
  compiler::LogicalOp& top_k = m.graph.ops.back();
  top_k.axis = 2;
  top_k.top_k = kTopK;
  (per_sequence ? top_k.seq_aux_loss : top_k.aux_loss) = kAuxLoss;
  int32_t silenced = m.op(router, ops::OpKind::Scale, {{gates, dims}}, dims, "silenced");
  m.graph.ops.back().factor = 0;
  int32_t loss = m.node(0, "loss", "MseLoss");
  m.graph.loss = m.op(loss, ops::OpKind::MseLoss, {{silenced, dims}, {target, dims}}, {});
  m.graph.infer_batch_axes();
  return std::move(m.graph);
}

std::optional<ir::Module> compile(const LogicalGraph& g, int32_t micro_batches) {
  compiler::StrategySpec spec = make_spec(g, {{"d", 1}}, kBatch, micro_batches);
  spec.train.optimizer = compiler::Optimizer::Sgd;
  spec.train.learning_rate = 1;
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<compiler::CompiledStrategy> c = compiler::compile_strategy({g, spec}, sources, diags);
  if (!c) return std::nullopt;
  return std::move(c->module);
}

// The update of w after one step. Per group of T tokens (a micro-batch, or
// a sequence) with c_i of its routes to expert i, one of G in the step,
// d/dscore[t, i] = aux_loss · n · c_i / (k · T² · G).
std::vector<double> expected_update(const HostTensor& x, const HostTensor& w, int32_t micro_batches,
                                    bool per_sequence) {
  const int64_t tokens = per_sequence ? kSeq : kBatch / micro_batches * kSeq;
  const int64_t groups = kBatch * kSeq / tokens;
  std::vector<double> update(kExperts, 0.0);
  for (int64_t group = 0; group < groups; ++group) {
    std::vector<double> counts(kExperts, 0.0), x_sums(kExperts, 0.0);
    for (int64_t t = group * tokens; t < (group + 1) * tokens; ++t) {
      std::vector<std::pair<double, int64_t>> row;
      for (int64_t i = 0; i < kExperts; ++i) {
        const double xi = x.data[static_cast<size_t>(t * kExperts + i)];
        row.push_back({-xi * w.data[static_cast<size_t>(i)], i});  // the lower index first on ties
        x_sums[static_cast<size_t>(i)] += xi;
      }
      std::sort(row.begin(), row.end());
      for (int64_t j = 0; j < kTopK; ++j) counts[static_cast<size_t>(row[static_cast<size_t>(j)].second)] += 1;
    }
    for (int64_t i = 0; i < kExperts; ++i)
      update[static_cast<size_t>(i)] += kAuxLoss * kExperts * counts[static_cast<size_t>(i)] /
                                        (kTopK * static_cast<double>(tokens * tokens * groups)) *
                                        x_sums[static_cast<size_t>(i)];
  }
  return update;
}

class LoadBalancingLoss : public ::testing::TestWithParam<std::tuple<int32_t, bool>> {};

TEST_P(LoadBalancingLoss, UpdatesTheScoresWeightsByTheSwitchTransformerGradient) {
  const auto [micro_batches, per_sequence] = GetParam();
  std::optional<ir::Module> m = compile(make_router(per_sequence), micro_batches);
  ASSERT_TRUE(m.has_value());
  const ir::Function& f = *step_function(*m);
  Execution run = execute(*m, f, make_argument_source(0), {Arithmetic::F64, true, {}});
  ASSERT_FALSE(run.problem.has_value()) << run.problem->message;

  std::map<std::string, ir::ValueId> args;
  for (const ir::Arg& a : f.args) args[std::string(m->str(f.values[a.value].name))] = a.value;
  const std::vector<int64_t> shape{kBatch, kSeq, kExperts};
  HostTensor x(ir::DType::F64, shape);
  for (int32_t mb = 0; mb < micro_batches; ++mb) {
    const std::string name = micro_batches > 1 ? "x.mb" + std::to_string(mb) : "x";
    ASSERT_TRUE(args.count(name)) << name;
    const HostTensor part = run.logical(args[name]).logical;
    std::copy(part.data.begin(), part.data.end(), x.data.begin() + static_cast<std::ptrdiff_t>(mb * part.data.size()));
  }
  ASSERT_TRUE(args.count("router.w"));
  const HostTensor w = run.logical(args["router.w"]).logical;
  const std::vector<ir::ValueId> replaces = next_step_arguments(*m, f);
  const HostTensor* updated = nullptr;
  HostTensor next;
  for (size_t i = 0; i < f.returns.size(); ++i)
    if (replaces[i] == args["router.w"]) updated = &(next = run.logical(f.returns[i]).logical);
  ASSERT_NE(updated, nullptr);

  const std::vector<double> update = expected_update(x, w, micro_batches, per_sequence);
  for (int64_t i = 0; i < kExperts; ++i) {
    const size_t at = static_cast<size_t>(i);
    EXPECT_NE(update[at], 0.0);
    EXPECT_NEAR(w.data[at] - updated->data[at], update[at], 1e-12) << "expert " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(MicroBatchesAndSequences, LoadBalancingLoss,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()));

// Counts over the micro-batch are its statistics, as batch norm's: the
// single-device reference runs the strategy's micro-batches. Counts per
// sequence are the same however the batch is cut.
TEST(LoadBalancingLoss, OverTheMicroBatchMakesTheReferenceRunTheStrategysMicroBatches) {
  std::optional<ir::Module> micro_batch = compile(make_router(false), 2), sequence = compile(make_router(true), 2);
  ASSERT_TRUE(micro_batch.has_value() && sequence.has_value());
  EXPECT_EQ(reference_micro_batches(*micro_batch, 2), 2);
  EXPECT_EQ(reference_micro_batches(*sequence, 2), 1);
}

}  // namespace
}  // namespace dstc::reference
