#include "compiler/driver/verify_progress.h"

#include <ostream>

#include <fmt/format.h>

#include "compiler/driver/human_units.h"

namespace dstc {

namespace {
constexpr double kQuietSeconds = 2;
constexpr double kLongRunSeconds = 60;
}  // namespace

VerifyProgress::VerifyProgress(std::ostream& err, bool terminal, const reference::ProgramWork& single,
                               const reference::ProgramWork& strategy, std::function<void(double)> on_long_run,
                               Clock clock)
    : err_(err),
      single_(single),
      strategy_(strategy),
      on_long_run_(std::move(on_long_run)),
      clock_(std::move(clock)),
      total_(single.total + strategy.total),
      started_(clock_()),
      last_report_(started_) {
  if (terminal) bar_.emplace(err);
}

void VerifyProgress::after_op(reference::VerifiedProgram program, ir::OpId op) {
  const bool single = program == reference::VerifiedProgram::SingleDevice;
  done_ += (single ? single_ : strategy_).per_op[op];
  auto now = clock_();
  double elapsed = std::chrono::duration<double>(now - started_).count();
  double since_report = std::chrono::duration<double>(now - last_report_).count();
  if (elapsed < kQuietSeconds || (reported_ && since_report < (bar_ ? 0.25 : 30)) || done_ <= 0) return;
  double left = (total_ - done_) * elapsed / done_;
  if (!warned_ && elapsed + left > kLongRunSeconds) {
    warned_ = true;
    clear();
    auto before = clock_();
    on_long_run_(elapsed + left);
    started_ += clock_() - before;
  }
  double fraction = total_ > 0 ? done_ / total_ : 1;
  std::string text = fmt::format("{:.0f}% of the work done ({} step), about {} left", 100 * fraction,
                                 single ? "single-device" : "strategy's", human_duration(left));
  if (bar_)
    bar_->draw(fraction, "verify: " + text);
  else
    err_ << "dstc verify: " << text << '\n' << std::flush;
  last_report_ = clock_();
  reported_ = true;
}

void VerifyProgress::clear() {
  if (bar_) bar_->clear();
}

}  // namespace dstc
