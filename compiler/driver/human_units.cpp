#include "compiler/driver/human_units.h"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

namespace dstc {

std::string human_duration(double seconds) {
  if (!(seconds < 1e9)) return "more than 30 years";
  if (seconds < 10) return fmt::format("{:.1f} s", seconds);
  auto s = static_cast<int64_t>(std::lround(seconds));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {} s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{} h {} min", s / 3600, s % 3600 / 60);
  return fmt::format("{} days {} h", s / 86400, s % 86400 / 3600);
}

std::string human_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{:.3g} {}", bytes, kUnits[unit]);
}

}  // namespace dstc
