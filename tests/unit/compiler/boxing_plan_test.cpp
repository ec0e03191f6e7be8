// Boxing plans over several mesh axes: which collectives, in which order,
// and the bytes they move.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "compiler/sbp/boxing_plan.h"
#include "ir/registry.h"

namespace dstc::compiler {
namespace {

constexpr ir::Sbp B{ir::Sbp::Broadcast, 0};
constexpr ir::Sbp P{ir::Sbp::PartialSum, 0};
constexpr ir::Sbp S(uint8_t dim) { return {ir::Sbp::Split, dim}; }
constexpr ir::Sbp F{ir::Sbp::Flat, 0};

std::string steps(const std::vector<AxisTransfer>& plan) {
  std::string out;
  for (const AxisTransfer& t : plan) {
    out += fmt::format("{}{}@{}", ir::op_name(t.op), t.flat ? "(flat)" : "", t.axis);
    for (int a = t.axis + 1; t.span && a < 32; ++a)
      if ((t.span >> a) & 1u) out += fmt::format("+{}", a);
    out += " ";
  }
  return out;
}

// HSDP: mesh [rep: 2 nodes, shard: 8 GPUs]; each micro-batch's gradient is
// partial on both axes and is stored sharded within the node, replicated
// across nodes. Reduce-scatter inside the node first, then all-reduce the
// eighth across nodes: 8x fewer inter-node bytes than the other order.
TEST(BoxingPlan, HsdpReduceScattersInsideTheNodeBeforeAllReducingAcross) {
  ir::Mesh mesh("world", {{"rep", 2}, {"shard", 8}});
  ir::Layout from{P, P}, to{B, S(0)};
  std::vector<AxisTransfer> plan = plan_boxing(from, to);
  EXPECT_EQ(steps(plan), "reduce_scatter@1 all_reduce@0 ");
  const double n = 1024;
  // Ring bytes per device: RS over 8 is 7/8 n, AR over 2 of n/8 is 2·(1/2)·n/8.
  EXPECT_DOUBLE_EQ(boxing_bytes(plan, from, n, mesh), 7.0 / 8 * n + n / 8);
}

// Gathering a dim while scattering another: scatter first, so the gather
// moves the smaller tensor.
TEST(BoxingPlan, ReduceScatterOnOneDimGoesBeforeAllGatherOnAnother) {
  ir::Mesh mesh("world", {{"a", 4}, {"b", 2}});
  ir::Layout from{S(1), P}, to{B, S(0)};
  std::vector<AxisTransfer> plan = plan_boxing(from, to);
  EXPECT_EQ(steps(plan), "reduce_scatter@1 all_gather@0 ");
  const double n = 800;  // local n/4 before either step
  EXPECT_DOUBLE_EQ(boxing_bytes(plan, from, n, mesh), 0.5 * n / 4 + 3 * n / 8);
}

// A local shard costs nothing and shrinks what an all-reduce on another
// axis moves.
TEST(BoxingPlan, LocalShardGoesBeforeAnAllReduce) {
  ir::Mesh mesh("world", {{"a", 4}, {"b", 4}});
  std::vector<AxisTransfer> plan = plan_boxing({P, B}, {B, S(1)});
  EXPECT_EQ(steps(plan), "shard@1 all_reduce@0 ");
}

// The same tensor dim split over two axes: the earlier axis chunks
// outermost, so splits are removed from the latest axis down and added from
// the earliest up, even where another order would move less.
TEST(BoxingPlan, StepsOnTheSameDimKeepTheirNestingOrder) {
  std::vector<AxisTransfer> plan = plan_boxing({S(0), B}, {B, S(0)});
  EXPECT_EQ(steps(plan), "all_gather@0 shard@1 ");
  plan = plan_boxing({P, P}, {S(0), S(0)});
  EXPECT_EQ(steps(plan), "reduce_scatter@0 reduce_scatter@1 ");
  // Sequence parallelism inside context parallelism's chunk: tp's split is
  // the inner one, gathered and scattered on its own.
  EXPECT_EQ(steps(plan_boxing({S(1), S(1)}, {S(1), B})), "all_gather@1 ");
  EXPECT_EQ(steps(plan_boxing({S(1), P}, {S(1), S(1)})), "reduce_scatter@1 ");
}

// A step that would leave a chunk non-contiguous waits for the splits inside
// it to go. Experts split over tp moving to dp (expert parallelism): tp's
// split of e is gathered before dp's all-to-all splits e outermost.
TEST(BoxingPlan, InnerSplitsOfADimGoBeforeAnOuterOneChanges) {
  EXPECT_EQ(steps(plan_boxing({S(0), S(1)}, {S(1), B})), "all_gather@1 all_to_all@0 ");
  // dp's chunks of dim 0 outside tp's: tp's split is gathered and sharded
  // again around dp's reduce-scatter.
  EXPECT_EQ(steps(plan_boxing({P, S(0)}, {S(0), S(0)})), "all_gather@1 reduce_scatter@0 shard@1 ");
  // An all-to-all between dims another axis splits inside: its gather and shard.
  EXPECT_EQ(steps(plan_boxing({S(0), S(1)}, {S(1), S(1)})), "all_gather@1 all_to_all@0 shard@1 ");
}

// Carries out `plan` on `from`, checking each step's nesting (the earlier
// axis chunks outermost: a split is removed only when it is the innermost
// of its dim, added only as the new innermost). The layout reached, or an
// error.
std::string run_plan(ir::Layout layout, const std::vector<AxisTransfer>& plan) {
  auto splits_inside = [&](int dim, int axis) {
    for (size_t a = static_cast<size_t>(axis) + 1; a < layout.size(); ++a)
      if (layout[a].kind == ir::Sbp::Split && layout[a].dim == dim) return true;
    return false;
  };
  for (const AxisTransfer& t : plan) {
    if (t.span) {
      // One all_to_all over every axis of the span: they alone split the
      // dim it leaves and the dim it makes.
      for (size_t a = 0; a < layout.size(); ++a) {
        bool in = (t.span >> a) & 1u;
        if (in && layout[a] != S(static_cast<uint8_t>(t.from_dim))) return "spans an axis without the split";
        if (!in && layout[a].kind == ir::Sbp::Split && (layout[a].dim == t.from_dim || layout[a].dim == t.to_dim))
          return "spans a dim another axis splits";
        if (in) layout[a] = S(static_cast<uint8_t>(t.to_dim));
      }
      continue;
    }
    ir::Sbp& at = layout[static_cast<size_t>(t.axis)];
    if (t.from_dim >= 0) {
      if (at != S(static_cast<uint8_t>(t.from_dim))) return "removes a split the axis does not have";
      if (splits_inside(t.from_dim, t.axis)) return "removes an outer split under an inner one";
    }
    if (t.to_dim >= 0 && splits_inside(t.to_dim, t.axis)) return "adds an outer split under an inner one";
    switch (t.op) {
      case ir::OpKind::AllGather: at = B; break;
      case ir::OpKind::Unshard: at = P; break;
      case ir::OpKind::AllReduce:
        if (at.kind != ir::Sbp::PartialSum) return "all-reduces a value that is not partial";
        at = B;
        break;
      case ir::OpKind::Partialize:
        if (at.kind != ir::Sbp::Broadcast) return "partializes a value that is not replicated";
        at = P;
        break;
      case ir::OpKind::ReduceScatter:
        if (at.kind != ir::Sbp::PartialSum) return "reduce-scatters a value that is not partial";
        at = S(static_cast<uint8_t>(t.to_dim));
        break;
      case ir::OpKind::Shard:
        if (at.kind != ir::Sbp::Broadcast) return "shards a value that is not replicated";
        at = S(static_cast<uint8_t>(t.to_dim));
        break;
      case ir::OpKind::AllToAll: at = S(static_cast<uint8_t>(t.to_dim)); break;
      default: return "an unexpected step";
    }
  }
  std::string out;
  for (const ir::Sbp& x : layout)
    out += x.kind == ir::Sbp::Split ? fmt::format("S({}) ", x.dim) : x.kind == ir::Sbp::Broadcast ? "B " : "P ";
  return out;
}

// Tokens split over [dp, tp] on the batch going to experts split over both
// (parallel folding): one all_to_all over the two axes, not a gather over
// tp and an all_to_all over dp. With a third axis splitting the batch
// alone it is still one (that axis keeps its split); where another axis
// splits the experts' dim before, or the tokens' after, axis by axis.
TEST(BoxingPlan, OneAllToAllSpansTheAxesThatSplitBothDims) {
  EXPECT_EQ(steps(plan_boxing({S(0), S(0)}, {S(1), S(1)})), "all_to_all@0+1 ");
  EXPECT_EQ(steps(plan_boxing({S(0), S(0), S(0)}, {S(1), S(1), S(1)})), "all_to_all@0+1+2 ");
  EXPECT_EQ(steps(plan_boxing({S(2), S(0), S(0)}, {S(2), S(1), S(1)})), "all_to_all@1+2 ");
  EXPECT_EQ(steps(plan_boxing({S(0), S(0)}, {S(1), B})), "all_gather@1 all_to_all@0 ");
  EXPECT_EQ(steps(plan_boxing({S(0), S(0)}, {S(1), S(0)})).find("@0+1"), std::string::npos);
}

// Every pair of layouts of a 3-D tensor over 2 and 3 mesh axes: each plan
// keeps every chunk contiguous at every step and reaches its target.
TEST(BoxingPlan, EveryPlanKeepsChunksContiguousAndReachesItsTarget) {
  const std::vector<ir::Sbp> kinds{B, P, S(0), S(1), S(2)};
  for (size_t axes : {2, 3}) {
    std::vector<ir::Layout> layouts{{}};
    for (size_t a = 0; a < axes; ++a) {
      std::vector<ir::Layout> longer;
      for (const ir::Layout& l : layouts)
        for (const ir::Sbp& k : kinds) {
          longer.push_back(l);
          longer.back().push_back(k);
        }
      layouts = std::move(longer);
    }
    for (const ir::Layout& from : layouts)
      for (const ir::Layout& to : layouts) {
        std::string reached = run_plan(from, plan_boxing(from, to));
        ASSERT_EQ(reached, run_plan(to, {}))
            << "from " << run_plan(from, {}) << "to " << run_plan(to, {}) << ": " << steps(plan_boxing(from, to));
      }
  }
}

// One axis at a time: each layout change is its one collective.
TEST(BoxingPlan, EachSingleAxisChangeIsItsCollective) {
  EXPECT_EQ(steps(plan_boxing({S(0)}, {B})), "all_gather@0 ");
  EXPECT_EQ(steps(plan_boxing({P}, {B})), "all_reduce@0 ");
  EXPECT_EQ(steps(plan_boxing({P}, {S(1)})), "reduce_scatter@0 ");
  EXPECT_EQ(steps(plan_boxing({S(0)}, {S(1)})), "all_to_all@0 ");
  EXPECT_EQ(steps(plan_boxing({B}, {S(1)})), "shard@0 ");
  EXPECT_EQ(steps(plan_boxing({S(0)}, {P})), "unshard@0 ");
  EXPECT_EQ(steps(plan_boxing({B}, {P})), "partialize@0 ");
  EXPECT_TRUE(plan_boxing({S(1)}, {S(1)}).empty());
}

// The distributed optimizer: a tensor-parallel weight's gradient, partial
// over dp and split over tp, is reduce-scattered into flat chunks of each
// tp rank's block; the updated chunks are gathered back. tp never moves.
TEST(BoxingPlan, FlatChunksAreOfTheBlockTheOtherAxesLeave) {
  ir::Mesh mesh("world", {{"dp", 3}, {"tp", 2}});
  ir::Layout grad{P, S(1)}, state{F, S(1)}, param{B, S(1)};
  std::vector<AxisTransfer> scatter = plan_boxing(grad, state);
  EXPECT_EQ(steps(scatter), "reduce_scatter(flat)@0 ");
  EXPECT_EQ(steps(plan_boxing(state, param)), "all_gather(flat)@0 ");
  EXPECT_EQ(steps(plan_boxing(param, state)), "shard(flat)@0 ");
  const double n = 1200;  // the tp block is 600, its dp chunk 200
  EXPECT_DOUBLE_EQ(boxing_bytes(scatter, grad, n, mesh), 2.0 / 3 * 600);
  EXPECT_DOUBLE_EQ(local_bytes(state, n, mesh), 200);
}

// A step that reshapes the block needs the whole block: the chunks are
// gathered first and the result flattened last.
TEST(BoxingPlan, ReshapingTheBlockGathersTheFlatChunksFirst) {
  EXPECT_EQ(steps(plan_boxing({F, S(0)}, {F, B})), "all_gather(flat)@0 all_gather@1 shard(flat)@0 ");
  EXPECT_EQ(steps(plan_boxing({S(0), B}, {B, F})), "all_gather@0 shard(flat)@1 ");
  EXPECT_EQ(steps(plan_boxing({F, B}, {S(1), B})), "all_gather(flat)@0 shard@0 ");
}

// HSDP with flat shards: reduce-scatter inside the node first, then the
// cross-node all-reduce moves the chunk, as with dim shards.
TEST(BoxingPlan, AllReducesRunOnFlatChunks) {
  EXPECT_EQ(steps(plan_boxing({P, P}, {B, F})), "reduce_scatter(flat)@1 all_reduce@0 ");
  EXPECT_EQ(steps(plan_boxing({P, F}, {B, F})), "all_reduce@0 ");
  EXPECT_EQ(steps(plan_boxing({P, F}, {B, B})), "all_reduce@0 all_gather(flat)@1 ");
}

// Flat over several axes (Megatron-Core's distributed optimizer over data
// and context parallelism): one collective over all of them each way, so
// the gradient is reduce-scattered once over the dp-cp group; a B axis
// among P ones is partialized first, so the reduction counts it once.
TEST(BoxingPlan, FlatOverSeveralAxesIsOneCollectiveOverAllOfThem) {
  EXPECT_EQ(steps(plan_boxing({P, P, S(0)}, {F, F, S(0)})), "reduce_scatter(flat)@0+1 ");
  EXPECT_EQ(steps(plan_boxing({F, F, S(0)}, {B, B, S(0)})), "all_gather(flat)@0+1 ");
  EXPECT_EQ(steps(plan_boxing({B, B, S(0)}, {F, F, S(0)})), "shard(flat)@0+1 ");
  EXPECT_EQ(steps(plan_boxing({P, B}, {F, F})), "partialize@1 reduce_scatter(flat)@0+1 ");
  // Flattening over one more axis gathers the chunks and cuts them again.
  EXPECT_EQ(steps(plan_boxing({F, B}, {F, F})), "all_gather(flat)@0 shard(flat)@0+1 ");
}

}  // namespace
}  // namespace dstc::compiler
