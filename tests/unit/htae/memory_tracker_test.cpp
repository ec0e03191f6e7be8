#include "htae/memory_tracker.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace dstc::htae {
namespace {

TEST(MemoryTracker, TracksLiveBytesAndPeak) {
  MemoryTracker mem(2, 1000, /*record_timeline=*/true);
  mem.alloc(0, 300, 0.0, MemoryKind::Weights);
  mem.alloc(0, 400, 1.0, MemoryKind::Activations);  // 700 live
  mem.free(0, 400, 2.0, MemoryKind::Activations);   // 300
  mem.alloc(0, 200, 3.0, MemoryKind::Gradients);    // 500
  mem.alloc(1, 50, 0.5, MemoryKind::Other);
  EXPECT_EQ(mem.live(0), 500);
  EXPECT_EQ(mem.peak(0), 700);
  EXPECT_DOUBLE_EQ(mem.peak_time(0), 1.0);
  EXPECT_EQ(mem.at_peak(0), (MemoryBreakdown{300, 0, 0, 400, 0}));
  EXPECT_EQ(mem.kind_peaks(0), (MemoryBreakdown{300, 0, 200, 400, 0}));
  EXPECT_EQ(mem.peak(1), 50);
  EXPECT_EQ(mem.max_peak(), 700);
  EXPECT_FALSE(mem.any_oom());
  ASSERT_EQ(mem.timeline(0).size(), 4u);
  EXPECT_EQ(mem.timeline(0)[2].live_bytes, 300);
}

TEST(MemoryTracker, ReportsTheFirstTimeOverCapacity) {
  MemoryTracker mem(1, 1000);
  mem.alloc(0, 600, 0.0, MemoryKind::Weights);
  mem.alloc(0, 300, 1.0, MemoryKind::Activations);  // 900: fits
  mem.alloc(0, 200, 2.0, MemoryKind::Activations);  // 1100: out of memory
  mem.free(0, 500, 3.0, MemoryKind::Activations);
  mem.alloc(0, 1000, 4.0, MemoryKind::Gradients);  // 1600: still the first OOM at t = 2
  EXPECT_TRUE(mem.oom(0));
  EXPECT_DOUBLE_EQ(*mem.first_oom_time(0), 2.0);
  EXPECT_EQ(mem.peak(0), 1600);
  EXPECT_EQ(mem.at_peak(0), (MemoryBreakdown{600, 0, 1000, 0, 0}));
  EXPECT_TRUE(mem.any_oom());
  EXPECT_TRUE(mem.timeline(0).empty());
}

TEST(MemoryTracker, RejectsImpossibleEvents) {
  MemoryTracker mem(1, 1000);
  mem.alloc(0, 100, 1.0, MemoryKind::Weights);
  EXPECT_THROW(mem.free(0, 200, 1.0, MemoryKind::Weights), std::logic_error);
  EXPECT_THROW(mem.free(0, 50, 1.0, MemoryKind::Activations), std::logic_error);  // none of that kind
  EXPECT_THROW(mem.alloc(0, 1, 0.5, MemoryKind::Weights), std::logic_error);
}

}  // namespace
}  // namespace dstc::htae
