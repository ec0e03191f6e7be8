// A one-line progress bar with throughput and ETA, redrawn in place on a
// terminal; `dstc search` shows it only when its output is a terminal.
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>

namespace dstc::search {

class ProgressBar {
 public:
  ProgressBar(std::ostream& out, std::string unit);
  // "[#######             ]  345/1035 configurations  120/s  ETA 6 s"
  void update(size_t done, size_t total);
  // Erases the bar so that the report starts on a clean line.
  void clear();

 private:
  std::ostream& out_;
  std::string unit_;
  std::chrono::steady_clock::time_point started_;
  size_t drawn_width_ = 0;
};

}  // namespace dstc::search
