#include "htae/rate_curve.h"

#include <algorithm>
#include <cmath>

namespace dstc::htae {
namespace {

// For a fixed half, log(max_rate) minimising the squared log error is the
// mean of log(rate / (x / (x + half))); returns it and the error.
std::pair<double, double> best_scale(const std::vector<RatePoint>& points, double half) {
  double sum = 0;
  for (const RatePoint& p : points) sum += std::log(p.rate) - std::log(p.x / (p.x + half));
  double log_max = sum / static_cast<double>(points.size());
  double error = 0;
  for (const RatePoint& p : points) {
    double miss = std::log(p.rate) - log_max - std::log(p.x / (p.x + half));
    error += miss * miss;
  }
  return {log_max, error};
}

}  // namespace

std::optional<RateCurve> fit_rate_curve(const std::vector<RatePoint>& points) {
  std::vector<RatePoint> usable;
  for (const RatePoint& p : points) {
    if (p.x > 0 && p.rate > 0) usable.push_back(p);
  }
  auto [lo, hi] = std::minmax_element(usable.begin(), usable.end(),
                                      [](const RatePoint& a, const RatePoint& b) { return a.x < b.x; });
  if (usable.size() < 2 || lo->x == hi->x) return std::nullopt;
  // The error is smooth and unimodal in log(half) in practice: a coarse scan
  // over a range well past the data, then golden-section refinement.
  double a = std::log(lo->x) - std::log(1e3), b = std::log(hi->x) + std::log(1e3);
  constexpr int kScan = 200;
  double best = a, best_error = best_scale(usable, std::exp(a)).second;
  for (int i = 1; i <= kScan; ++i) {
    double t = a + (b - a) * i / kScan;
    double error = best_scale(usable, std::exp(t)).second;
    if (error < best_error) best = t, best_error = error;
  }
  double step = (b - a) / kScan, left = best - step, right = best + step;
  constexpr double kGolden = 0.6180339887498949;
  for (int i = 0; i < 60; ++i) {
    double m1 = right - kGolden * (right - left), m2 = left + kGolden * (right - left);
    if (best_scale(usable, std::exp(m1)).second < best_scale(usable, std::exp(m2)).second) {
      right = m2;
    } else {
      left = m1;
    }
  }
  double half = std::exp((left + right) / 2);
  return RateCurve{std::exp(best_scale(usable, half).first), half};
}

}  // namespace dstc::htae
