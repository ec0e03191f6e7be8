// A router's losses: the load-balancing losses of a top_k (aux_loss over
// each micro-batch, seq_aux_loss over each sequence) and a softmax's
// z-loss. Their gradients, run by the reference executor, against the
// formulas worked out here by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
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
using compiler::testing::make_spec;
using compiler::testing::ModelBuilder;

constexpr int64_t kBatch = 4, kSeq = 3, kExperts = 4, kTopK = 2;
constexpr double kCoefficient = 0.3;

// scores = x[b, s, e] · w[e], then `router_op` (a top_k or a softmax with a
// loss of its own), and a loss that reads its output scaled by 0: the only
// gradient w gets is the router's loss's.
LogicalGraph make_router(ops::OpKind router_op, const std::function<void(compiler::LogicalOp&)>& set_loss) {
  ModelBuilder m;
  int32_t x = m.input("x", {{"b", kBatch}, {"s", kSeq}, {"e", kExperts}});
  int32_t target = m.input("target", {{"b", kBatch}, {"s", kSeq}, {"e", kExperts}});
  m.graph.tensors[x].batch_axis = 0;
  m.graph.tensors[target].batch_axis = 0;
  int32_t router = m.node(0, "router", "Router");
  int32_t w = m.param(router, "w", {{"e", kExperts}});
  const std::vector<std::string> dims{"b", "s", "e"};
  int32_t scores = m.op(router, ops::OpKind::Mul, {{x, dims}, {w, {"e"}}}, dims, "scores");
  int32_t routed = m.op(router, router_op, {{scores, dims}}, dims, "routed");
  m.graph.ops.back().axis = 2;
  set_loss(m.graph.ops.back());
  int32_t silenced = m.op(router, ops::OpKind::Scale, {{routed, dims}}, dims, "silenced");
  m.graph.ops.back().attrs.set_real("by", 0);
  int32_t loss = m.node(0, "loss", "MseLoss");
  m.graph.loss = m.op(loss, ops::OpKind::MseLoss, {{silenced, dims}, {target, dims}}, {});
  m.graph.infer_batch_axes();
  return std::move(m.graph);
}

LogicalGraph make_balanced_router(bool per_sequence) {
  return make_router(ops::OpKind::TopK, [&](compiler::LogicalOp& top_k) {
    top_k.attrs.set_integer("k", kTopK);
    top_k.attrs.set_real(per_sequence ? "seq_aux_loss" : "aux_loss", kCoefficient);
  });
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

// One SGD step (learning rate 1) of a compiled router: the batch x (its
// micro-batches put together), w before and after.
struct RouterStep {
  std::vector<double> x, w, updated;
};

std::optional<RouterStep> run_step(const ir::Module& m, int32_t micro_batches) {
  const ir::Function& f = *step_function(m);
  Execution run = execute(m, f, make_argument_source(0), {Arithmetic::F64, true, {}});
  if (run.problem) {
    ADD_FAILURE() << run.problem->message;
    return std::nullopt;
  }
  std::map<std::string, ir::ValueId> args;
  for (const ir::Arg& a : f.args) args[std::string(m.str(f.values[a.value].name))] = a.value;
  RouterStep step;
  for (int32_t mb = 0; mb < micro_batches; ++mb) {
    const std::string name = micro_batches > 1 ? "x.mb" + std::to_string(mb) : "x";
    if (!args.count(name)) {
      ADD_FAILURE() << "no argument " << name;
      return std::nullopt;
    }
    const HostTensor part = run.logical(args[name]).logical;
    step.x.insert(step.x.end(), part.data.begin(), part.data.end());
  }
  step.w = run.logical(args["router.w"]).logical.data;
  const std::vector<ir::ValueId> replaces = next_step_arguments(m, f);
  for (size_t i = 0; i < f.returns.size(); ++i)
    if (replaces[i] == args["router.w"]) step.updated = run.logical(f.returns[i]).logical.data;
  if (step.updated.size() != static_cast<size_t>(kExperts)) {
    ADD_FAILURE() << "w is not updated";
    return std::nullopt;
  }
  return step;
}

void expect_update(const RouterStep& step, const std::vector<double>& update) {
  for (int64_t i = 0; i < kExperts; ++i) {
    const size_t at = static_cast<size_t>(i);
    EXPECT_NE(update[at], 0.0);
    EXPECT_NEAR(step.w[at] - step.updated[at], update[at], 1e-12) << "expert " << i;
  }
}

// Per group of T tokens (a micro-batch, or a sequence) with c_i of its
// routes to expert i, one of G in the step,
// d/dscore[t, i] = aux_loss · n · c_i / (k · T² · G).
std::vector<double> balance_update(const RouterStep& step, int32_t micro_batches, bool per_sequence) {
  const int64_t tokens = per_sequence ? kSeq : kBatch / micro_batches * kSeq;
  const int64_t groups = kBatch * kSeq / tokens;
  std::vector<double> update(kExperts, 0.0);
  for (int64_t group = 0; group < groups; ++group) {
    std::vector<double> counts(kExperts, 0.0), x_sums(kExperts, 0.0);
    for (int64_t t = group * tokens; t < (group + 1) * tokens; ++t) {
      std::vector<std::pair<double, int64_t>> row;
      for (int64_t i = 0; i < kExperts; ++i) {
        const double xi = step.x[static_cast<size_t>(t * kExperts + i)];
        row.push_back({-xi * step.w[static_cast<size_t>(i)], i});  // the lower index first on ties
        x_sums[static_cast<size_t>(i)] += xi;
      }
      std::sort(row.begin(), row.end());
      for (int64_t j = 0; j < kTopK; ++j) counts[static_cast<size_t>(row[static_cast<size_t>(j)].second)] += 1;
    }
    for (int64_t i = 0; i < kExperts; ++i)
      update[static_cast<size_t>(i)] += kCoefficient * kExperts * counts[static_cast<size_t>(i)] /
                                        (kTopK * static_cast<double>(tokens * tokens * groups)) *
                                        x_sums[static_cast<size_t>(i)];
  }
  return update;
}

class LoadBalancingLoss : public ::testing::TestWithParam<std::tuple<int32_t, bool>> {};

TEST_P(LoadBalancingLoss, UpdatesTheScoresWeightsByTheSwitchTransformerGradient) {
  const auto [micro_batches, per_sequence] = GetParam();
  std::optional<ir::Module> m = compile(make_balanced_router(per_sequence), micro_batches);
  ASSERT_TRUE(m.has_value());
  std::optional<RouterStep> step = run_step(*m, micro_batches);
  ASSERT_TRUE(step.has_value());
  expect_update(*step, balance_update(*step, micro_batches, per_sequence));
}

INSTANTIATE_TEST_SUITE_P(MicroBatchesAndSequences, LoadBalancingLoss,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()));

// Counts over the micro-batch are its statistics, as batch norm's: the
// single-device reference runs the strategy's micro-batches. Counts per
// sequence are the same however the batch is cut.
TEST(LoadBalancingLoss, OverTheMicroBatchMakesTheReferenceRunTheStrategysMicroBatches) {
  std::optional<ir::Module> micro_batch = compile(make_balanced_router(false), 2);
  std::optional<ir::Module> sequence = compile(make_balanced_router(true), 2);
  ASSERT_TRUE(micro_batch.has_value() && sequence.has_value());
  EXPECT_EQ(reference_micro_batches(*micro_batch, 2), 2);
  EXPECT_EQ(reference_micro_batches(*sequence, 2), 1);
}

class RouterZLoss : public ::testing::TestWithParam<int32_t> {};

// z_loss · mean over the R rows of lse², so d/dw_i = Σ_t x[t, i] ·
// 2 · z_loss · lse_t · softmax(scores_t)_i / R, however the rows are cut.
TEST_P(RouterZLoss, UpdatesTheLogitsWeightsByTheZLossGradient) {
  const int32_t micro_batches = GetParam();
  std::optional<ir::Module> m =
      compile(make_router(ops::OpKind::Softmax,
                          [](compiler::LogicalOp& softmax) { softmax.attrs.set_real("z_loss", kCoefficient); }),
              micro_batches);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(reference_micro_batches(*m, micro_batches), 1);
  std::optional<RouterStep> step = run_step(*m, micro_batches);
  ASSERT_TRUE(step.has_value());
  const int64_t rows = kBatch * kSeq;
  std::vector<double> update(kExperts, 0.0);
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<double> scores(kExperts);
    double total = 0;
    for (int64_t i = 0; i < kExperts; ++i) {
      const size_t at = static_cast<size_t>(i);
      scores[at] = step->x[static_cast<size_t>(t * kExperts + i)] * step->w[at];
      total += std::exp(scores[at]);
    }
    const double lse = std::log(total);
    for (int64_t i = 0; i < kExperts; ++i) {
      const size_t at = static_cast<size_t>(i);
      update[at] += step->x[static_cast<size_t>(t * kExperts + i)] * 2 * kCoefficient * lse * std::exp(scores[at]) /
                    total / static_cast<double>(rows);
    }
  }
  expect_update(*step, update);
}

INSTANTIATE_TEST_SUITE_P(MicroBatches, RouterZLoss, ::testing::Values(1, 2));

}  // namespace
}  // namespace dstc::reference
