#include "compiler/driver/verify_progress.h"

#include <gtest/gtest.h>

#include <sstream>

#include "compiler/driver/human_units.h"

namespace dstc {
namespace {

using reference::VerifiedProgram;
using std::chrono::steady_clock;

// Two programs of ten ops each, every op one unit of work.
struct Programs {
  reference::ProgramWork single{std::vector<double>(10, 1.0), 10, 0};
  reference::ProgramWork strategy{std::vector<double>(10, 1.0), 10, 0};
};

struct FakeClock {
  steady_clock::time_point now{};
  void advance(double seconds) {
    now += std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(seconds));
  }
};

TEST(VerifyProgress, QuietForTheFirstTwoSeconds) {
  Programs p;
  FakeClock clock;
  std::ostringstream err;
  int warnings = 0;
  VerifyProgress progress(
      err, false, p.single, p.strategy, [&](double) { ++warnings; }, [&] { return clock.now; });
  for (ir::OpId op = 0; op < 10; ++op) {
    clock.advance(0.1);
    progress.after_op(VerifiedProgram::SingleDevice, op);
  }
  EXPECT_EQ(err.str(), "");
  EXPECT_EQ(warnings, 0);
}

TEST(VerifyProgress, EstimatesTheTimeLeftFromThePaceSoFar) {
  Programs p;
  FakeClock clock;
  std::ostringstream err;
  VerifyProgress progress(
      err, false, p.single, p.strategy, [](double) {}, [&] { return clock.now; });
  // One unit of twenty in 8 s, then five in 40 s: a line at once, the next 30 s later.
  for (ir::OpId op = 0; op < 5; ++op) {
    clock.advance(8);
    progress.after_op(VerifiedProgram::SingleDevice, op);
  }
  EXPECT_EQ(err.str(),
            "dstc verify: 5% of the work done (single-device step), about 2 min 32 s left\n"
            "dstc verify: 25% of the work done (single-device step), about 2 min 0 s left\n");
}

TEST(VerifyProgress, WarnsOnceWhenTheRunsWillTakeOverAMinute) {
  Programs p;
  FakeClock clock;
  std::ostringstream err;
  std::vector<double> warned;
  VerifyProgress progress(
      err, false, p.single, p.strategy,
      [&](double seconds) {
        warned.push_back(seconds);
        clock.advance(100);  // finding smaller -D values is not the runs' time
      },
      [&] { return clock.now; });
  for (ir::OpId op = 0; op < 10; ++op) {
    clock.advance(4);
    progress.after_op(VerifiedProgram::SingleDevice, op);
  }
  for (ir::OpId op = 0; op < 10; ++op) {
    clock.advance(4);
    progress.after_op(VerifiedProgram::Strategy, op);
  }
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_DOUBLE_EQ(warned[0], 80);
  // Reports at 4 s, 36 s and 68 s; the time spent in the warning is not the runs'.
  EXPECT_NE(err.str().find("85% of the work done (strategy's step), about 12 s left\n"), std::string::npos)
      << err.str();
}

TEST(HumanUnits, Durations) {
  EXPECT_EQ(human_duration(0.42), "0.4 s");
  EXPECT_EQ(human_duration(38.2), "38 s");
  EXPECT_EQ(human_duration(365), "6 min 5 s");
  EXPECT_EQ(human_duration(7800), "2 h 10 min");
  EXPECT_EQ(human_duration(3 * 86400 + 4 * 3600), "3 days 4 h");
  EXPECT_EQ(human_duration(1e300), "more than 30 years");
}

TEST(HumanUnits, Bytes) {
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(human_bytes(3.2 * (1ull << 30)), "3.2 GiB");
  EXPECT_EQ(human_bytes(16.0 * (1ull << 50)), "16 PiB");
}

}  // namespace
}  // namespace dstc
