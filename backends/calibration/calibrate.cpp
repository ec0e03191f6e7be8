#include "backends/calibration/calibrate.h"

#include <algorithm>

#include <fmt/format.h>

namespace dstc::calibration {
namespace {

double element_bytes(htae::ComputeDtype dtype) {
  switch (dtype) {
    case htae::ComputeDtype::Fp32:
    case htae::ComputeDtype::Tf32: return 4;
    case htae::ComputeDtype::Fp16:
    case htae::ComputeDtype::Bf16: return 2;
    case htae::ComputeDtype::Fp8: return 1;
  }
  return 4;
}

constexpr double kAddBytesPerElement = 3 * 4.0;  // two fp32 reads, one write

std::string rate_text(double rate, std::string_view unit) {
  if (rate >= 1e15) return fmt::format("{:.3g} P{}", rate / 1e15, unit);
  if (rate >= 1e12) return fmt::format("{:.3g} T{}", rate / 1e12, unit);
  return fmt::format("{:.3g} G{}", rate / 1e9, unit);
}

std::string bytes_text(double bytes) {
  if (bytes >= double(1 << 30)) return fmt::format("{:.3g} GiB", bytes / double(1 << 30));
  if (bytes >= double(1 << 20)) return fmt::format("{:.3g} MiB", bytes / double(1 << 20));
  return fmt::format("{:.3g} KiB", bytes / 1024);
}

// "  (79 % of 989 TFLOP/s)": a rate as a share of a data sheet's peak.
std::string share_of(double rate, double peak, std::string_view unit) {
  return peak > 0 ? fmt::format("  ({:.0f} % of {})", 100 * rate / peak, rate_text(peak, unit)) : "";
}

}  // namespace

double matmul_bytes(htae::ComputeDtype dtype, MatmulShape s) {
  double in = element_bytes(dtype), out = dtype == htae::ComputeDtype::Fp8 ? 2 : in;
  return in * static_cast<double>(s.m * s.k + s.k * s.n) + out * static_cast<double>(s.m * s.n);
}

Calibration calibrate(CalibrationDevice& device, const CalibrationPlan& plan, const Progress& progress) {
  Calibration result;
  result.profile.gpu = device.name();
  // A measurement may take a quarter of the device's memory at most, so
  // the library's workspace and anything else resident still fit.
  double budget = static_cast<double>(device.memory_bytes()) / 4;
  std::vector<htae::ComputeDtype> dtypes;
  for (htae::ComputeDtype dtype : plan.dtypes) {
    if (device.supports(dtype)) {
      dtypes.push_back(dtype);
    } else {
      result.skipped.push_back(fmt::format("{} matmuls: {} has no kernels for them", dtype_name(dtype), device.name()));
    }
  }
  size_t total = dtypes.size() * plan.matmuls.size() + plan.add_elements.size() + 1, done = 0;
  for (htae::ComputeDtype dtype : dtypes) {
    for (const MatmulShape& s : plan.matmuls) {
      std::string what = fmt::format("{} matmul {}x{}x{}", dtype_name(dtype), s.m, s.n, s.k);
      progress(done++, total, what);
      double bytes = matmul_bytes(dtype, s);
      if (bytes > budget) {
        result.skipped.push_back(fmt::format("{}: needs {} of memory", what, bytes_text(bytes)));
        continue;
      }
      std::optional<double> seconds = device.matmul_seconds(dtype, s);
      if (!seconds) {
        result.skipped.push_back(fmt::format("{}: the matmul library has no kernel for it", what));
        continue;
      }
      double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
      result.profile.add(htae::OpProfileEntry{"matmul", dtype, {s.m, s.n, s.k}, flops, bytes, *seconds});
    }
  }
  std::vector<htae::RatePoint> memory_points;
  for (int64_t elements : plan.add_elements) {
    double bytes = kAddBytesPerElement * static_cast<double>(elements);
    progress(done++, total, fmt::format("add of {}", bytes_text(bytes)));
    if (bytes > budget) {
      result.skipped.push_back(fmt::format("add of {}: too large for this device", bytes_text(bytes)));
      continue;
    }
    double seconds = device.add_seconds(elements);
    result.profile.add(htae::OpProfileEntry{"add", htae::ComputeDtype::Fp32, {elements}, 0, bytes, seconds});
    memory_points.push_back({bytes, bytes / seconds});
  }
  result.profile.memory_curve = htae::fit_rate_curve(memory_points);
  progress(done++, total, "kernel launches");
  result.profile.launch_overhead = device.launch_seconds();
  progress(done, total, "");
  return result;
}

std::string describe(const Calibration& c, const htae::GpuSpec* datasheet) {
  const htae::ProfileDatabase& p = c.profile;
  std::string out = fmt::format("{}\n", p.gpu);
  out += "  matmul: the best measured, and the rate at two layer shapes (tokens x out x in):\n";
  for (htae::ComputeDtype dtype : htae::kComputeDtypes) {
    const htae::OpProfileEntry* best = nullptr;
    for (const htae::OpProfileEntry& e : p.ops()) {
      if (e.kind == "matmul" && e.dtype == dtype && (!best || e.flops / e.seconds > best->flops / best->seconds)) {
        best = &e;
      }
    }
    if (!best) continue;
    double peak = datasheet && datasheet->peak_flops[static_cast<size_t>(dtype)] ? datasheet->peak(dtype) : 0;
    out += fmt::format("    {:<5} {} at {}x{}x{}{}\n", dtype_name(dtype),
                       rate_text(best->flops / best->seconds, "FLOP/s"), best->shape[0], best->shape[1], best->shape[2],
                       share_of(best->flops / best->seconds, peak, "FLOP/s"));
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{8192, 4096, 4096}, std::vector<int64_t>{2048, 1024, 1024}}) {
      if (std::optional<double> rate = p.matmul_rate(dtype, shape)) {
        out += fmt::format("          {} at {}x{}x{}{}\n", rate_text(*rate, "FLOP/s"), shape[0], shape[1], shape[2],
                           share_of(*rate, peak, "FLOP/s"));
      }
    }
  }
  if (p.memory_curve) {
    double best = 0;
    for (const htae::OpProfileEntry& e : p.ops()) {
      if (e.kind == "add") best = std::max(best, e.bytes / e.seconds);
    }
    double hbm = datasheet ? datasheet->hbm_bandwidth : 0;
    out += fmt::format("  streaming add: best {}{}\n", rate_text(best, "B/s"), share_of(best, hbm, "B/s"));
    out += fmt::format("          fitted {}, half at {}{}\n", rate_text(p.memory_curve->max_rate, "B/s"),
                       bytes_text(p.memory_curve->half), share_of(p.memory_curve->max_rate, hbm, "B/s"));
  }
  if (p.launch_overhead) out += fmt::format("  launch gap: {:.3g} us per kernel\n", *p.launch_overhead * 1e6);
  for (const std::string& s : c.skipped) out += fmt::format("  not measured: {}\n", s);
  return out;
}

}  // namespace dstc::calibration
