// Progress of `dstc verify`'s two runs, as a share of their estimated work
// (reference::ProgramWork), on the error stream: a bar redrawn in place on
// a terminal, else a line at 2 s and every 30 s after. Silent for the first 2 s, so quick
// runs (every test) print nothing.
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <optional>

#include "backends/reference/verify.h"
#include "backends/reference/work_estimate.h"
#include "compiler/driver/progress_bar.h"

namespace dstc {

class VerifyProgress {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `on_long_run(seconds)` is called once, when the measured pace says both
  // runs will take more than a minute in all; the time it takes is not
  // counted as the runs'.
  VerifyProgress(std::ostream& err, bool terminal, const reference::ProgramWork& single,
                 const reference::ProgramWork& strategy, std::function<void(double seconds)> on_long_run,
                 Clock clock = std::chrono::steady_clock::now);
  void after_op(reference::VerifiedProgram program, ir::OpId op);
  // Erases the bar before the report.
  void clear();

 private:
  std::ostream& err_;
  std::optional<ProgressBar> bar_;
  const reference::ProgramWork& single_;
  const reference::ProgramWork& strategy_;
  std::function<void(double)> on_long_run_;
  Clock clock_;
  double done_ = 0, total_ = 0;
  std::chrono::steady_clock::time_point started_, last_report_;
  bool warned_ = false, reported_ = false;
};

}  // namespace dstc
