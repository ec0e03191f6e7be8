#include "compiler/schedule/schedule_generators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "compiler/schedule/schedule_check.h"

namespace dstc::schedule {
namespace {

ScheduleTable make(ScheduleKind kind, int32_t p, int32_t m, int32_t v = 1, int32_t max_ongoing = 0,
                   bool forward_only = false) {
  auto result = generate_schedule({kind, p, v, m, max_ongoing, forward_only});
  EXPECT_TRUE(std::holds_alternative<ScheduleTable>(result)) << std::get<std::string>(result);
  return std::get<ScheduleTable>(result);
}

size_t leading_forwards(const std::vector<Action>& actions) {
  size_t n = 0;
  while (n < actions.size() && actions[n].kind == ActionKind::Forward) ++n;
  return n;
}

TEST(OneFOneB, WarmupThenAlternateThenDrain) {
  for (int32_t p = 1; p <= 6; ++p) {
    for (int32_t m = 1; m <= 10; ++m) {
      ScheduleTable t = make(ScheduleKind::OneFOneB, p, m);
      for (int32_t r = 0; r < p; ++r) {
        const auto& a = t.ranks[r];
        int32_t warmup = std::min(p - r - 1, m);
        ASSERT_EQ(a.size(), size_t(2 * m));
        for (int32_t i = 0; i < warmup; ++i) EXPECT_EQ(a[i], (Action{r, ActionKind::Forward, i, {}}));
        for (int32_t i = 0; i < m - warmup; ++i) {
          EXPECT_EQ(a[warmup + 2 * i], (Action{r, ActionKind::Forward, warmup + i, {}})) << p << " " << m << " " << r;
          EXPECT_EQ(a[warmup + 2 * i + 1], (Action{r, ActionKind::Backward, i, {}}));
        }
        for (int32_t i = 0; i < warmup; ++i)
          EXPECT_EQ(a[2 * m - warmup + i], (Action{r, ActionKind::Backward, m - warmup + i, {}}));
      }
    }
  }
}

TEST(OneFOneB, MaxOngoingCapsForwardsInFlight) {
  ScheduleTable t = make(ScheduleKind::OneFOneB, 4, 8, 1, 2);
  EXPECT_EQ(leading_forwards(t.ranks[0]), 2u);  // one warm-up forward, then F B
  SourceManager sm;
  DiagnosticEngine diags(sm);
  EXPECT_TRUE(check_schedule(t, {false, 2, {}}, diags));
}

// Overlapping the all-to-alls, Megatron-Core runs one more warm-up forward,
// the last stage included, so each backward has a forward to pair with.
TEST(OneFOneB, ExtraWarmupRunsOneMoreForwardAheadOnEveryRank) {
  ScheduleRequest request{ScheduleKind::OneFOneB, 4, 1, 8, 0, false, 1};
  auto result = generate_schedule(request);
  ASSERT_TRUE(std::holds_alternative<ScheduleTable>(result));
  const ScheduleTable& t = std::get<ScheduleTable>(result);
  for (int32_t r = 0; r < 4; ++r)
    EXPECT_EQ(leading_forwards(t.ranks[r]), size_t(5 - r)) << r;  // warm-up, then the first F B
  EXPECT_EQ(t.ranks[3][1], (Action{3, ActionKind::Forward, 1, {}}));
  EXPECT_EQ(t.ranks[3][2], (Action{3, ActionKind::Backward, 0, {}}));
  SourceManager sm;
  DiagnosticEngine diags(sm);
  EXPECT_TRUE(check_schedule(t, {false, 0, {}}, diags));
}

TEST(GPipe, AllForwardsThenAllBackwards) {
  ScheduleTable t = make(ScheduleKind::GPipe, 3, 4);
  for (int32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(leading_forwards(t.ranks[r]), 4u);
    EXPECT_EQ(t.ranks[r][4], (Action{r, ActionKind::Backward, 0, {}}));
  }
}

TEST(GPipe, MaxOngoingRunsInGroups) {
  ScheduleTable t = make(ScheduleKind::GPipe, 2, 4, 1, 2);
  std::vector<std::string> names;
  for (const Action& a : t.ranks[1]) names.push_back(to_string(a));
  EXPECT_EQ(names, (std::vector<std::string>{"1F0", "1F1", "1B0", "1B1", "1F2", "1F3", "1B2", "1B3"}));
}

TEST(Interleaved, WarmupChunkForwardsFollowMegatron) {
  for (int32_t p : {2, 3, 4}) {
    for (int32_t v : {1, 2, 3}) {
      for (int32_t m : {p, 2 * p, 4 * p}) {
        ScheduleTable t = make(ScheduleKind::Interleaved, p, m, v);
        ASSERT_EQ(t.num_stages, p * v);
        for (int32_t r = 0; r < p; ++r) {
          int32_t total = m * v;
          int32_t warmup = std::min(2 * (p - r - 1) + (v - 1) * p, total);
          size_t expected_leading = warmup == total ? size_t(total) : size_t(warmup + 1);
          EXPECT_EQ(leading_forwards(t.ranks[r]), expected_leading) << "p=" << p << " v=" << v << " m=" << m;
          for (const Action& a : t.ranks[r]) EXPECT_EQ(t.rank_of_stage(a.stage), r);
        }
      }
    }
  }
}

TEST(Interleaved, FirstChunksVisitModelChunksInTurn) {
  ScheduleTable t = make(ScheduleKind::Interleaved, 2, 4, 2);
  std::vector<std::string> names;
  for (size_t i = 0; i < 6; ++i) names.push_back(to_string(t.ranks[0][i]));
  EXPECT_EQ(names, (std::vector<std::string>{"0F0", "0F1", "2F0", "2F1", "0F2", "2B0"}));
}

TEST(Interleaved, NeedsMicroBatchesAMultipleOfRanks) {
  auto result = generate_schedule({ScheduleKind::Interleaved, 4, 2, 6, 0, false});
  ASSERT_TRUE(std::holds_alternative<std::string>(result));
  EXPECT_NE(std::get<std::string>(result).find("multiple"), std::string::npos);
}

TEST(ZeroBubbleH1, HoldsNoMoreThan1F1BAndOnlyTheLastWeightGradTrails) {
  int32_t p = 4, m = 8;
  ScheduleTable t = make(ScheduleKind::ZeroBubbleH1, p, m);
  for (int32_t r = 0; r < p; ++r) {
    const auto& a = t.ranks[r];
    ASSERT_EQ(a.size(), size_t(3 * m));
    // A micro-batch's activations live from its F to its W: never more of
    // them than 1F1B holds (p − r).
    int32_t in_flight = 0, peak = 0;
    for (const Action& x : a) {
      in_flight += x.kind == ActionKind::Forward ? 1 : x.kind == ActionKind::WeightGrad ? -1 : 0;
      peak = std::max(peak, in_flight);
    }
    EXPECT_EQ(peak, p - r) << "rank " << r;
    // The W passes filled the waits: the last I is followed by its own W only.
    ASSERT_GE(a.size(), 2u);
    EXPECT_EQ(a[a.size() - 2], (Action{r, ActionKind::InputGrad, m - 1, {}})) << "rank " << r;
    EXPECT_EQ(a.back(), (Action{r, ActionKind::WeightGrad, m - 1, {}})) << "rank " << r;
  }
  // At one step per pass (the paper's T_F = T_I = T_W), 30 steps; 1F1B,
  // whose backward is I and W together, takes (m + p − 1) · 3 = 33.
  EXPECT_EQ(run_unit_time(t).num_steps, 30);
}

TEST(ZeroBubble2P, HoldsAtMostTwicePAndLeavesOnlyTheFirstForwardsWait) {
  for (int32_t p : {2, 4, 6}) {
    for (int32_t m : {2 * p, 4 * p}) {
      ScheduleTable t = make(ScheduleKind::ZeroBubble2P, p, m);
      int32_t first_peak = 0;
      for (int32_t r = 0; r < p; ++r) {
        ASSERT_EQ(t.ranks[r].size(), size_t(3 * m));
        int32_t in_flight = 0, peak = 0;
        for (const Action& x : t.ranks[r]) {
          in_flight += x.kind == ActionKind::Forward ? 1 : x.kind == ActionKind::WeightGrad ? -1 : 0;
          peak = std::max(peak, in_flight);
        }
        EXPECT_LE(peak, 2 * p) << "p " << p << " m " << m << " rank " << r;
        if (r == 0) first_peak = peak;
      }
      // More in flight than ZB-H1's and 1F1B's p on the first rank.
      EXPECT_GT(first_peak, p);
      // At one step per pass, the only idle steps are the last rank's wait
      // for its first forward: 3m + p − 1 (ZB-H1 at p = 4, m = 8: 30).
      EXPECT_EQ(run_unit_time(t).num_steps, 3 * m + p - 1) << "p " << p << " m " << m;
    }
  }
}

TEST(ZeroBubbleV, PlacesAVHoldsAbout1F1BsMemoryAndAlmostNoBubble) {
  int32_t p = 4, m = 8;
  ScheduleTable t = make(ScheduleKind::ZeroBubbleV, p, m, 2);
  ASSERT_FALSE(t.round_robin());
  EXPECT_EQ(t.num_stages, 2 * p);
  for (int32_t r = 0; r < p; ++r) {
    EXPECT_EQ(t.rank_of_stage(r), r);
    EXPECT_EQ(t.rank_of_stage(2 * p - 1 - r), r);  // the way back
    const auto& a = t.ranks[r];
    ASSERT_EQ(a.size(), size_t(2 * 3 * m));
    // Chunk passes between F and W, each half a 1F1B stage's activations:
    // at most 2p, what 1F1B's rank 0 holds (p whole stages).
    int32_t in_flight = 0, peak = 0;
    for (const Action& x : a) {
      EXPECT_TRUE(x.stage == r || x.stage == 2 * p - 1 - r) << to_string(x);
      in_flight += x.kind == ActionKind::Forward ? 1 : x.kind == ActionKind::WeightGrad ? -1 : 0;
      peak = std::max(peak, in_flight);
    }
    EXPECT_LE(peak, 2 * p) << "rank " << r;
  }
  // 48 half-size passes per rank in 51 unit steps (25.5 whole-stage steps):
  // ZB-H1 takes 30, 1F1B 33.
  EXPECT_EQ(run_unit_time(t).num_steps, 51);
}

// DualPipeV's phases (deepseek-ai/DualPipe, dualpipev.py) on rank r of p:
// 2(p − r − 1) chunk-0 forwards, then r + 1 forward pairs, then its
// backwards each paired with the other chunk's forward; every zero-bubble
// input-grad's weight-grad follows later, first in first out.
TEST(DualPipeV, RunsDeepSeeksPhasesInAV) {
  int32_t p = 4, m = 10;
  ScheduleTable t = make(ScheduleKind::DualPipeV, p, m, 2);
  ASSERT_FALSE(t.round_robin());
  EXPECT_EQ(t.num_stages, 2 * p);
  for (int32_t r = 0; r < p; ++r) {
    const auto& a = t.ranks[r];
    const int32_t down = r, up = 2 * p - 1 - r;
    size_t warmup = leading_forwards(a);
    // The chunk-0 forwards of phase 1, then phase 2's first pair.
    EXPECT_GE(warmup, size_t(2 * (p - r - 1) + 2)) << "rank " << r;
    for (int32_t i = 0; i < 2 * (p - r - 1); ++i) EXPECT_EQ(a[i], (Action{down, ActionKind::Forward, i, {}}));
    EXPECT_EQ(a[2 * (p - r - 1) + 1], (Action{up, ActionKind::Forward, 0, {}})) << "rank " << r;
    // Each (stage, micro-batch) runs its forward once and its backward
    // once: whole, or as an input-grad and later a weight-grad.
    std::map<std::pair<int32_t, int32_t>, std::string> passes;
    for (const Action& x : a) {
      EXPECT_TRUE(x.stage == down || x.stage == up) << to_string(x);
      passes[{x.stage, x.micro_batch}] += action_letter(x.kind);
    }
    EXPECT_EQ(passes.size(), size_t(2 * m));
    for (const auto& [key, letters] : passes) EXPECT_TRUE(letters == "FB" || letters == "FIW") << letters;
  }
  // The steady phase pairs: rank 0 runs 0F(2p−1) then the last stage's
  // backward of micro-batch p − 1, then its forward of micro-batch p and
  // chunk 0's first backward.
  const auto& r0 = t.ranks[0];
  auto at = std::find(r0.begin(), r0.end(), Action{0, ActionKind::Forward, 2 * p - 1, {}});
  ASSERT_LE(at + 4, r0.end());
  EXPECT_EQ(at[1], (Action{2 * p - 1, ActionKind::Backward, p - 1, {}}));
  EXPECT_EQ(at[2], (Action{2 * p - 1, ActionKind::Forward, p, {}}));
  EXPECT_EQ(at[3], (Action{0, ActionKind::Backward, 0, {}}));
  auto refused = generate_schedule({ScheduleKind::DualPipeV, p, 2, 2 * p - 1});
  ASSERT_TRUE(std::holds_alternative<std::string>(refused));
  EXPECT_NE(std::get<std::string>(refused).find("at least 2p = 8 micro-batches"), std::string::npos);
  // Its forward-backward pairs are the ones it names: phase 4's two a
  // round (the last rank's first apart) and phase 5's one.
  ASSERT_TRUE(t.names_pairs);
  for (int32_t r = 0; r < p; ++r) {
    int32_t named = 0;
    const auto& a = t.ranks[r];
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].pairs_with_next) continue;
      ++named;
      ASSERT_LT(i + 1, a.size());
      EXPECT_EQ(a[i].kind, ActionKind::Forward);
      EXPECT_EQ(a[i + 1].kind, ActionKind::Backward);
      EXPECT_NE(a[i].stage, a[i + 1].stage);
    }
    EXPECT_EQ(named, 2 * (m - 2 * p + r + 1) + (p - r - 1) - (r == p - 1 ? 1 : 0)) << "rank " << r;
  }
  auto bounded = generate_schedule({ScheduleKind::DualPipeV, p, 2, m, 2});
  ASSERT_TRUE(std::holds_alternative<std::string>(bounded));
  EXPECT_NE(std::get<std::string>(bounded).find("max_ongoing"), std::string::npos);
}

TEST(Schedules, EveryBuiltinScheduleIsSoundAndCompletes) {
  SourceManager sm;
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1,
        ScheduleKind::ZeroBubble2P, ScheduleKind::ZeroBubbleV, ScheduleKind::DualPipeV}) {
    for (int32_t p = 1; p <= 5; ++p) {
      for (int32_t m = 1; m <= 11; ++m) {
        for (int32_t v = v_shaped(kind) ? 2 : 1; v <= (kind == ScheduleKind::Interleaved ? 3
                                                       : v_shaped(kind)                  ? 2
                                                                                         : 1);
             ++v) {
          if (kind == ScheduleKind::Interleaved && m % p != 0) continue;
          for (bool forward_only : {false, true}) {
            if (kind == ScheduleKind::DualPipeV && !forward_only && m < 2 * p) continue;
            ScheduleTable t = make(kind, p, m, v, 0, forward_only);
            DiagnosticEngine diags(sm);
            EXPECT_TRUE(check_schedule(t, {forward_only, 0, {}}, diags))
                << schedule_kind_name(kind) << " p=" << p << " m=" << m << " v=" << v;
          }
        }
      }
    }
  }
}

TEST(Schedules, OneFOneBTakesTheTextbookNumberOfSteps) {
  // One step per action: (m + p − 1) forward slots and as many backward.
  ScheduleTable t = make(ScheduleKind::OneFOneB, 4, 8);
  EXPECT_EQ(run_unit_time(t).num_steps, 2 * (8 + 4 - 1));
}

}  // namespace
}  // namespace dstc::schedule
