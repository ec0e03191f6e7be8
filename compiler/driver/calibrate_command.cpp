// dstc calibrate [-o FILE] [--quick] [--cluster FILE]: measures the local
// GPU (matmuls per dtype, streaming bandwidth, the launch gap) and writes a
// profile database that `--profile` hands to the simulator
// (docs/cost-model.md).
#include <ostream>

#include <fmt/format.h>

#include "backends/calibration/calibrate.h"
#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/driver/output_file.h"
#include "compiler/driver/progress_bar.h"

namespace dstc {
namespace {

struct CalibrateOptions {
  std::string output = "dstc-profile.toml";
  std::string cluster;
  bool quick = false;
};

int run_calibrate(CommandContext& ctx, const CalibrateOptions& opts) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<htae::ClusterSpec> cluster;
  if (!opts.cluster.empty()) {
    cluster = htae::load_cluster(sources, diags, opts.cluster);
    if (!cluster) {
      diags.render(ctx.err, ctx.color);
      return kExitInputErrors;
    }
  }
  calibration::LocalGpu gpu = calibration::open_local_gpu();
  if (!gpu.device) {
    ctx.err << fmt::format("dstc calibrate: error: {}\n", gpu.why_not);
    return gpu.built_without_gpu ? kExitInternal : kExitInputErrors;
  }
  calibration::CalibrationDevice& device = *gpu.device;
  calibration::CalibrationPlan plan = calibration::calibration_plan(opts.quick);
  ProgressBar bar(ctx.err);
  auto progress = [&](size_t done, size_t total, const std::string& next) {
    if (ctx.err_is_terminal) bar.draw(static_cast<double>(done) / static_cast<double>(total), next);
  };
  calibration::Calibration result;
  try {
    result = calibration::calibrate(device, plan, progress);
  } catch (const calibration::DeviceError& e) {
    if (ctx.err_is_terminal) bar.clear();
    ctx.err << fmt::format("dstc calibrate: error: measuring {} failed: {}\n", device.name(), e.what());
    return kExitInputErrors;
  }
  if (ctx.err_is_terminal) bar.clear();
  ctx.out << calibration::describe(result, cluster ? &cluster->gpu : nullptr);
  std::string failure =
      write_file_atomically(opts.output, [&](std::ostream& file) { file << result.profile.to_toml(); });
  if (!failure.empty()) {
    ctx.err << fmt::format("dstc calibrate: error: cannot write the profile to '{}': {}\n", opts.output, failure);
    return kExitInputErrors;
  }
  ctx.out << fmt::format("wrote {}: pass it to the simulator with --profile {}\n", opts.output, opts.output);
  return kExitSuccess;
}

}  // namespace

Command add_calibrate_command(CLI::App& root) {
  auto opts = std::make_shared<CalibrateOptions>();
  CLI::App* sub = root.add_subcommand("calibrate", "Measure the local GPU and write a profile for the simulator");
  sub->add_option("-o,--output", opts->output, "The profile database to write (TOML)")
      ->check(non_empty_path())
      ->capture_default_str();
  sub->add_flag("--quick", opts->quick, "A few shapes per dtype instead of the full grid");
  sub->add_option("--cluster", opts->cluster, "A cluster file whose GPU data sheet the measurements are compared with")
      ->transform(found_in_stdlib());
  return {sub, [opts](CommandContext& ctx) { return run_calibrate(ctx, *opts); }};
}

}  // namespace dstc
