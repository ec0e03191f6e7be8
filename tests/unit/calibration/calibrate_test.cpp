// dstc calibrate without a GPU: a modelled device whose times follow known
// formulas, so the plan, the profile it yields and the estimator reading that
// profile can be checked exactly.
#include "backends/calibration/calibrate.h"

#include <cmath>

#include <gtest/gtest.h>

#include "htae/op_estimator.h"

namespace dstc::calibration {
namespace {

using htae::ComputeDtype;

// A GPU of 100 TFLOP/s (bf16; fp32 at a tenth) whose matmul rate falls with
// each small dim as d / (d + 256), streaming at 2 TB/s x b / (b + 1 MB), with
// a 4 us launch gap. No fp8.
class ModelledDevice final : public CalibrationDevice {
 public:
  std::string name() const override { return "Modelled GPU"; }
  int64_t memory_bytes() const override { return int64_t{16} << 30; }
  bool supports(ComputeDtype dtype) const override { return dtype != ComputeDtype::Fp8; }
  std::optional<double> matmul_seconds(ComputeDtype dtype, MatmulShape s) override {
    ++matmuls;
    return 2.0 * double(s.m) * double(s.n) * double(s.k) / rate(dtype, s);
  }
  double add_seconds(int64_t elements) override {
    double bytes = 12.0 * double(elements);
    return bytes / (2e12 * bytes / (bytes + 1e6));
  }
  double launch_seconds() override { return 4e-6; }

  static double rate(ComputeDtype dtype, MatmulShape s) {
    double peak = dtype == ComputeDtype::Fp32 ? 1e13 : 1e14;
    auto f = [](int64_t d) { return double(d) / double(d + 256); };
    return peak * f(s.m) * f(s.n) * f(s.k);
  }
  int matmuls = 0;
};

TEST(Calibrate, MeasuresTheWholeGridOfEverySupportedDtype) {
  ModelledDevice device;
  CalibrationPlan plan = calibration_plan(false);
  ASSERT_EQ(plan.matmuls.size(), 9u * 9u * 9u);
  std::vector<std::string> steps;
  Calibration c = calibrate(device, plan, [&](size_t done, size_t total, const std::string& next) {
    EXPECT_LE(done, total);
    steps.push_back(next);
  });
  // Four dtypes of five (no fp8 here), every shape fits in 16 GiB / 4.
  EXPECT_EQ(device.matmuls, 4 * 729);
  ASSERT_EQ(c.skipped.size(), 1u);
  EXPECT_EQ(c.skipped[0], "fp8 matmuls: Modelled GPU has no kernels for them");
  EXPECT_EQ(steps.front(), "fp32 matmul 64x64x64");
  EXPECT_EQ(c.profile.gpu, "Modelled GPU");
  EXPECT_DOUBLE_EQ(*c.profile.launch_overhead, 4e-6);
}

TEST(Calibrate, TheProfileReproducesTheDeviceOnItsGridAndBetween) {
  ModelledDevice device;
  Calibration c = calibrate(device, calibration_plan(false), [](size_t, size_t, const std::string&) {});
  // On a grid point: the measured rate.
  MatmulShape on{4096, 1024, 16384};
  EXPECT_NEAR(
      *c.profile.matmul_rate(ComputeDtype::Bf16, {4096, 1024, 16384}) / ModelledDevice::rate(ComputeDtype::Bf16, on), 1,
      1e-12);
  // Between grid points the rate is log-interpolated: within 3 % of this
  // smooth device at a shape no grid point has.
  MatmulShape between{6144, 3000, 200};
  double interpolated = *c.profile.matmul_rate(ComputeDtype::Bf16, {6144, 3000, 200});
  EXPECT_NEAR(interpolated / ModelledDevice::rate(ComputeDtype::Bf16, between), 1, 0.03);
  // Beyond the largest dim the rate holds.
  EXPECT_DOUBLE_EQ(*c.profile.matmul_rate(ComputeDtype::Bf16, {65536, 16384, 16384}),
                   *c.profile.matmul_rate(ComputeDtype::Bf16, {16384, 16384, 16384}));
  EXPECT_FALSE(c.profile.matmul_rate(ComputeDtype::Fp8, {4096, 4096, 4096}));
  // The streaming curve is the device's own: 2 TB/s, half at 1 MB.
  ASSERT_TRUE(c.profile.memory_curve);
  EXPECT_NEAR(c.profile.memory_curve->max_rate, 2e12, 2e12 * 1e-6);
  EXPECT_NEAR(c.profile.memory_curve->half, 1e6, 1e6 * 1e-4);
}

TEST(Calibrate, TheEstimatorPricesOpsAtTheMeasuredRates) {
  ModelledDevice device;
  Calibration c = calibrate(device, calibration_plan(true), [](size_t, size_t, const std::string&) {});
  htae::GpuSpec datasheet;
  datasheet.name = "Modelled GPU";
  datasheet.peak_flops[static_cast<size_t>(ComputeDtype::Fp32)] = 1e13;
  datasheet.peak_flops[static_cast<size_t>(ComputeDtype::Bf16)] = 1e14;
  datasheet.hbm_bandwidth = 3e12;
  datasheet.launch_overhead = 1e-6;
  htae::OpEstimator measured(datasheet, &c.profile);
  htae::OpCostQuery mm;
  mm.kind = "einsum";  // any matmul-class kind reads the "matmul" grid
  mm.op_class = htae::OpClass::Matmul;
  mm.dtype = ComputeDtype::Bf16;
  mm.shape = {1024, 1024, 1024};
  mm.flops = 2.0 * 1024 * 1024 * 1024;
  mm.bytes_read = 6.0 * 1024 * 1024;
  // 1024 lies halfway between the quick grid's 256 and 4096 in log scale.
  double rate = std::exp((std::log(ModelledDevice::rate(ComputeDtype::Bf16, {256, 256, 256})) +
                          std::log(ModelledDevice::rate(ComputeDtype::Bf16, {4096, 4096, 4096}))) /
                         2);
  htae::OpCostEstimate e = measured.estimate(mm);
  EXPECT_TRUE(e.from_profile);
  EXPECT_NEAR(e.seconds, mm.flops / rate + 4e-6, 1e-12);
  // An elementwise op streams at the measured curve, not the data sheet's HBM.
  htae::OpCostQuery add;
  add.kind = "add";
  add.dtype = ComputeDtype::Bf16;
  add.bytes_read = 2e8;
  add.bytes_written = 1e8;
  EXPECT_NEAR(measured.estimate(add).seconds, 3e8 / c.profile.memory_curve->at(3e8) + 4e-6, 1e-12);
}

TEST(Calibrate, DescribesTheRatesAgainstTheDataSheet) {
  ModelledDevice device;
  Calibration c = calibrate(device, calibration_plan(true), [](size_t, size_t, const std::string&) {});
  htae::GpuSpec datasheet;
  datasheet.peak_flops[static_cast<size_t>(ComputeDtype::Bf16)] = 1e14;
  datasheet.hbm_bandwidth = 2.5e12;
  std::string text = describe(c, &datasheet);
  EXPECT_NE(text.find("Modelled GPU\n"), std::string::npos) << text;
  // The best bf16 matmul of the quick grid is 4096 cubed.
  EXPECT_NE(text.find("    bf16  83.4 TFLOP/s at 4096x4096x4096  (83 % of 100 TFLOP/s)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  launch gap: 4 us per kernel\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  not measured: fp8 matmuls: Modelled GPU has no kernels for them\n"), std::string::npos)
      << text;
}

// A device too small for some of the plan: what does not fit in a quarter of
// its memory is skipped and listed, the rest measured.
class SmallDevice final : public CalibrationDevice {
 public:
  std::string name() const override { return "Small GPU"; }
  int64_t memory_bytes() const override { return int64_t{64} << 20; }
  bool supports(ComputeDtype dtype) const override { return dtype == ComputeDtype::Bf16; }
  std::optional<double> matmul_seconds(ComputeDtype, MatmulShape) override { return 1e-3; }
  double add_seconds(int64_t) override { return 1e-4; }
  double launch_seconds() override { return 5e-6; }
};

TEST(Calibrate, SkipsWhatDoesNotFitInAQuarterOfTheDevice) {
  SmallDevice device;
  Calibration c = calibrate(device, calibration_plan(true), [](size_t, size_t, const std::string&) {});
  std::vector<std::string> too_large;
  for (const std::string& s : c.skipped) {
    if (s.find("memory") != std::string::npos || s.find("too large") != std::string::npos) too_large.push_back(s);
  }
  // 16 MiB is the budget: the four bf16 matmuls with two 4096 dims and the
  // two larger adds need more.
  ASSERT_EQ(too_large.size(), 6u);
  EXPECT_EQ(too_large.front(), "bf16 matmul 256x4096x4096: needs 36 MiB of memory");
  EXPECT_EQ(too_large.back(), "add of 768 MiB: too large for this device");
}

TEST(RateCurve, TheFitRecoversASaturatingCurve) {
  std::vector<htae::RatePoint> points;
  for (double x = 1e3; x < 1e9; x *= 3) points.push_back({x, 4e12 * x / (x + 2e6)});
  std::optional<htae::RateCurve> fit = htae::fit_rate_curve(points);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->max_rate / 4e12, 1, 1e-6);
  EXPECT_NEAR(fit->half / 2e6, 1, 1e-5);
  EXPECT_FALSE(htae::fit_rate_curve({{5, 1}, {5, 2}}));
}

}  // namespace
}  // namespace dstc::calibration
