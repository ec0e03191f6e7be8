// A rate that saturates with size, rate(x) = max_rate x x / (x + half):
// what a GPU reaches on matmuls as their smallest dimension grows, or on
// streaming kernels as their bytes grow. `dstc calibrate` fits one to its
// measurements; the op estimator prices ops with it.
#pragma once

#include <optional>
#include <vector>

namespace dstc::htae {

struct RateCurve {
  double max_rate = 0;  // units per second, approached as x grows
  double half = 0;      // the x at which half of max_rate is reached

  double at(double x) const { return max_rate * x / (x + half); }
};

struct RatePoint {
  double x = 0;     // the size the rate depends on
  double rate = 0;  // measured, units per second
};

// The curve with the least squared error in log(rate) over the points, the
// error a relative miss makes; nullopt for fewer than two distinct x.
std::optional<RateCurve> fit_rate_curve(const std::vector<RatePoint>& points);

}  // namespace dstc::htae
