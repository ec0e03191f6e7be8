// A one-line progress bar redrawn in place on a terminal: `dstc search`
// shows it when its output is a terminal, `dstc verify` on its error stream.
#pragma once

#include <iosfwd>
#include <string>

namespace dstc {

class ProgressBar {
 public:
  explicit ProgressBar(std::ostream& out) : out_(out) {}
  // "[#######             ] TEXT" with `fraction` of the bar filled.
  void draw(double fraction, const std::string& text);
  // Erases the bar so that the report starts on a clean line.
  void clear();

 private:
  std::ostream& out_;
  size_t drawn_width_ = 0;
};

}  // namespace dstc
