#include "compiler/driver/progress_bar.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

namespace dstc {

void ProgressBar::draw(double fraction, const std::string& text) {
  constexpr size_t kBarWidth = 30;
  auto filled = static_cast<size_t>(std::lround(std::clamp(fraction, 0.0, 1.0) * kBarWidth));
  std::string line = fmt::format("[{}{}] {}", std::string(filled, '#'), std::string(kBarWidth - filled, ' '), text);
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

}  // namespace dstc
