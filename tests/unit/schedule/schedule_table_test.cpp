#include "compiler/schedule/schedule_table.h"

#include <gtest/gtest.h>

#include "compiler/schedule/schedule_check.h"
#include "compiler/schedule/schedule_csv.h"

namespace dstc::schedule {
namespace {

TEST(Action, ParsesAndPrintsPyTorchNames) {
  auto a = parse_action("12W3");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->stage, 12);
  EXPECT_EQ(a->kind, ActionKind::WeightGrad);
  EXPECT_EQ(a->micro_batch, 3);
  EXPECT_EQ(to_string(*a), "12W3");
  for (const char* bad : {"", "F0", "0F", "0X1", "0F1x", "-1F0", "0f0", "99999999999F0"})
    EXPECT_FALSE(parse_action(bad)) << bad;
}

TEST(ScheduleCsv, ReadsRowsSkipsCommunicationAndKeepsCellLocations) {
  SourceManager sm;
  FileId f = sm.add("t.csv", "# two ranks\n0F0, 0RECV_B0 ,0B0\n,1F0,1B0\n");
  DiagnosticEngine diags(sm);
  auto table = read_schedule_csv(f, {2, 1, 1}, diags);
  ASSERT_TRUE(table) << diags.render(diags.diagnostics().front(), false);
  ASSERT_EQ(table->ranks.size(), 2u);
  EXPECT_EQ(table->ranks[0].size(), 2u);
  EXPECT_EQ(diags.location(table->ranks[1][0].where), "t.csv:3:2");
  EXPECT_EQ(write_schedule_csv(*table), "0F0,0B0\n1F0,1B0\n");
  EXPECT_TRUE(check_schedule(*table, {}, diags));
}

// A stage runs where its row lists it: rank 0 holds stages 0 and 3, rank 1
// stages 1 and 2 (a V), and the check follows that placement.
TEST(ScheduleCsv, PlacesEachStageOnTheRankWhoseRowListsIt) {
  SourceManager sm;
  FileId f = sm.add("v.csv", "0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n");
  DiagnosticEngine diags(sm);
  auto table = read_schedule_csv(f, {2, 2, 1}, diags);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->rank_of_stage(0), 0);
  EXPECT_EQ(table->rank_of_stage(1), 1);
  EXPECT_EQ(table->rank_of_stage(2), 1);
  EXPECT_EQ(table->rank_of_stage(3), 0);
  EXPECT_EQ(table->stages_on(1), 2);
  EXPECT_TRUE(check_schedule(*table, {}, diags));
  // Round-robin rows keep the round-robin placement.
  FileId looping = sm.add("l.csv", "0F0,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n");
  auto interleaved = read_schedule_csv(looping, {2, 2, 1}, diags);
  ASSERT_TRUE(interleaved);
  EXPECT_TRUE(interleaved->round_robin());
  EXPECT_EQ(interleaved->rank_of_stage(3), 1);
}

// A stage listed on two rows: the later row is wrong, and the note points
// at the first row's action, which placed the stage.
TEST(ScheduleCsv, AStageOnTwoRowsPointsAtTheRowThatPlacedIt) {
  SourceManager sm;
  FileId f = sm.add("t.csv", "0F0,1F0\n1B0,0B0\n");
  DiagnosticEngine diags(sm);
  auto table = read_schedule_csv(f, {2, 1, 1}, diags);
  ASSERT_TRUE(table);
  EXPECT_FALSE(check_schedule(*table, {}, diags));
  ASSERT_EQ(diags.diagnostics().size(), 2u);
  const Diagnostic& wrong = diags.diagnostics()[0];
  EXPECT_EQ(wrong.kind.name, "schedule-wrong-rank");
  EXPECT_EQ(wrong.message, "action 1B0 runs on rank 1, but stage 1 runs on rank 0");
  EXPECT_EQ(diags.location(wrong.range), "t.csv:2:1");
  EXPECT_EQ(diags.location(wrong.notes.at(0).range), "t.csv:1:5");
}

TEST(ScheduleCheck, ReportsEveryKindOfBrokenTable) {
  SourceManager sm;
  struct Case {
    const char* csv;
    const char* kind;
  } cases[] = {
      {"0F0,0B0\n1F0\n", "schedule-missing-action"},       {"0F0,0F0,0B0\n1F0,1B0\n", "schedule-duplicate-action"},
      {"0F0,0B0,1F0\n1B0\n", "schedule-wrong-rank"},       {"0B0,0F0\n1F0,1B0\n", "schedule-order"},
      {"0F0,0B0\n1F0,1B0,1F7\n", "schedule-out-of-range"}, {"0F0,0I0,0W0,0B0\n1F0,1B0\n", "schedule-unexpected-action"},
      {"0F0,0B0\n1F0,1Q0\n", "schedule-bad-cell"},
  };
  for (const Case& c : cases) {
    FileId f = sm.add("t.csv", c.csv);
    DiagnosticEngine diags(sm);
    auto table = read_schedule_csv(f, {2, 1, 1}, diags);
    if (table) {
      EXPECT_FALSE(check_schedule(*table, {}, diags)) << c.csv;
    }
    ASSERT_TRUE(diags.has_errors()) << c.csv;
    EXPECT_EQ(diags.diagnostics().front().kind.name, c.kind) << c.csv;
  }
}

TEST(ScheduleCheck, CrossedOrderDeadlocksAndTheGridShowsWhere) {
  SourceManager sm;
  FileId f = sm.add("t.csv", "0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n");
  DiagnosticEngine diags(sm);
  auto table = read_schedule_csv(f, {2, 1, 2}, diags);
  ASSERT_TRUE(table);
  EXPECT_FALSE(check_schedule(*table, {}, diags));
  ASSERT_EQ(diags.diagnostics().size(), 1u);
  const Diagnostic& deadlock = diags.diagnostics()[0];
  EXPECT_EQ(deadlock.kind.name, "schedule-deadlock");
  // Located at the cells of the cycle: rank 0's 0B0, waiting for rank 1's 1B0.
  EXPECT_EQ(deadlock.range.begin, 4u);
  EXPECT_EQ(deadlock.notes.at(0).range.begin, 24u);
  EXPECT_EQ(deadlock.notes.at(0).message, "0B0 waits for 1B0 on rank 1, which cannot run either");
  const std::string& grid = deadlock.notes.at(1).message;
  EXPECT_NE(grid.find("rank 0 is blocked at 0B0 (action 2 of its list), waiting for 1B0 on rank 1"), std::string::npos)
      << grid;
  EXPECT_NE(grid.find("rank 1 is blocked at 1F1 (action 1 of its list), waiting for 0F1 on rank 0"), std::string::npos)
      << grid;
}

TEST(ScheduleCheck, AChainOfManyRanksRunsInLinearTime) {
  // 65,536 ranks, one micro-batch: 131,072 steps. Checking every rank at
  // every step would be 8.6e9 checks; waking only the dependents is 2.6e5.
  constexpr int32_t kRanks = 1 << 16;
  ScheduleTable table;
  table.num_ranks = table.num_stages = kRanks;
  table.num_micro_batches = 1;
  table.ranks.resize(kRanks);
  for (int32_t r = 0; r < kRanks; ++r) {
    table.ranks[r] = {{r, ActionKind::Forward, 0, {}}, {r, ActionKind::Backward, 0, {}}};
  }
  ScheduleRun run = run_unit_time(table);
  EXPECT_TRUE(run.complete);
  EXPECT_EQ(run.num_steps, 2 * kRanks);
  EXPECT_EQ(run.steps[kRanks - 1][1], kRanks);  // the last stage's backward follows its forward at once
  EXPECT_EQ(run.steps[0][1], 2 * kRanks - 1);
  std::string grid = render_grid(table, run);
  EXPECT_EQ(grid, "(65536 ranks x 131072 steps: too large to draw; --csv prints the table)\n");
}

TEST(ScheduleCheck, MaxOngoingIsEnforcedOnTables) {
  SourceManager sm;
  FileId f = sm.add("t.csv", "0F0,0F1,0F2,0B0,0B1,0B2\n");
  DiagnosticEngine diags(sm);
  auto table = read_schedule_csv(f, {1, 1, 3}, diags);
  ASSERT_TRUE(table);
  EXPECT_FALSE(check_schedule(*table, {false, 2, {}}, diags));
  EXPECT_EQ(diags.diagnostics().front().kind.name, "schedule-max-ongoing");
}

}  // namespace
}  // namespace dstc::schedule
