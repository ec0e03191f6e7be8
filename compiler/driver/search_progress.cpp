#include "compiler/driver/search_progress.h"

#include <cmath>
#include <ostream>

#include <fmt/format.h>

namespace dstc::search {

ProgressBar::ProgressBar(std::ostream& out, std::string unit)
    : out_(out), unit_(std::move(unit)), started_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(size_t done, size_t total) {
  constexpr size_t kBarWidth = 30;
  double fraction = total ? static_cast<double>(done) / static_cast<double>(total) : 1;
  auto filled = static_cast<size_t>(std::lround(fraction * kBarWidth));
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  std::string eta = rate > 0 ? fmt::format("ETA {:.0f} s", static_cast<double>(total - done) / rate) : "ETA -";
  std::string line = fmt::format("[{}{}] {}/{} {}  {:.0f}/s  {}", std::string(filled, '#'),
                                 std::string(kBarWidth - filled, ' '), done, total, unit_, rate, eta);
  // Pad over what the previous, possibly longer, line left.
  size_t width = line.size();
  if (width < drawn_width_) line += std::string(drawn_width_ - width, ' ');
  drawn_width_ = std::max(drawn_width_, width);
  out_ << '\r' << line << std::flush;
}

void ProgressBar::clear() {
  if (drawn_width_ == 0) return;
  out_ << '\r' << std::string(drawn_width_, ' ') << '\r' << std::flush;
  drawn_width_ = 0;
}

}  // namespace dstc::search
