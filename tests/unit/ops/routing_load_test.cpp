// The expected fill of experts' slots the simulator prices mixtures of
// experts by: balanced, capped at capacity, skewed, split over ranks.
#include "compiler/ops/routing_load.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dstc::ops {
namespace {

TEST(RoutingLoad, BalancedRoutingFillsRoutesOverSlots) {
  // 4096 tokens x 2 routes over 8 experts of 4096 slots (dropless): a quarter.
  RoutingLoad load{8, 4096, 4096 * 2, 0, {}};
  EXPECT_DOUBLE_EQ(fullest_slot_fill(load, 1), 0.25);
  EXPECT_DOUBLE_EQ(fullest_slot_fill(load, 8), 0.25);
  // Capacity factor 1: every slot filled.
  load.capacity = 1024;
  EXPECT_DOUBLE_EQ(fullest_slot_fill(load, 8), 1.0);
}

TEST(RoutingLoad, SkewLoadsTheRankOfThePopularExperts) {
  // Zipf 1 over 4 experts: shares 12/25, 6/25, 4/25, 3/25 of 100 routes.
  RoutingLoad load{4, 100, 100, 1.0, {}};
  // One expert per rank: the fullest holds the most popular, 48 tokens.
  EXPECT_NEAR(fullest_slot_fill(load, 4), 0.48, 1e-12);
  // Two ranks: the popular experts dealt round-robin, rank 0 gets the 1st
  // and 3rd (48 + 16), rank 1 the 2nd and 4th (24 + 12).
  EXPECT_NEAR(fullest_slot_fill(load, 2), 64.0 / 200, 1e-12);
  // Unsplit: the mean, 100 of 400 slots.
  EXPECT_NEAR(fullest_slot_fill(load, 1), 0.25, 1e-12);
  // Capacity 30: the popular expert drops 18 of its 48 tokens.
  load.capacity = 30;
  EXPECT_NEAR(fullest_slot_fill(load, 4), 1.0, 1e-12);
  EXPECT_NEAR(fullest_slot_fill(load, 1), (30 + 24 + 16 + 12) / 120.0, 1e-12);
}

TEST(RoutingLoad, MeasuredCountsFillTheChunksTheirExpertsArePlacedIn) {
  // 100 routes over 4 experts measured 10, 50, 30, 10; the skew is ignored.
  const double counts[] = {10, 50, 30, 10};
  RoutingLoad load{4, 100, 100, 3.0, counts};
  EXPECT_NEAR(fullest_slot_fill(load, 4), 0.50, 1e-12);
  // Two ranks hold experts {0, 1} and {2, 3}, as Megatron-Core places them:
  // 60 and 40 tokens of 200 slots each.
  EXPECT_NEAR(fullest_slot_fill(load, 2), 60.0 / 200, 1e-12);
  EXPECT_NEAR(fullest_slot_fill(load, 1), 0.25, 1e-12);
  // Counts are relative: a histogram of any total gives the same shares.
  const double scaled[] = {1000, 5000, 3000, 1000};
  load.measured = scaled;
  EXPECT_NEAR(fullest_slot_fill(load, 2), 60.0 / 200, 1e-12);
}

}  // namespace
}  // namespace dstc::ops
