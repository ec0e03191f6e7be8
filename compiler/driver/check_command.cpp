// dstc check FILE... [-D name=value]: every diagnostic of the files, exit 1
// on any error, silence and exit 0 when they are clean.
#include <optional>
#include <ostream>

#include <fmt/format.h>

#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/frontend/frontend.h"
#include "compiler/pipeline/load_strategy.h"

namespace dstc {
namespace {

struct CheckOptions {
  std::vector<std::string> files;
  std::vector<std::string> defines;
};

int run_check(CommandContext& ctx, const CheckOptions& opts) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::unique_ptr<frontend::FrontendResult> result = frontend::check_files(opts.files, opts.defines, sources, diags);
  // Each strategy's cluster file must load and hold its mesh.
  for (const frontend::CheckedStrategy& s : result->strategies) {
    if (s.strategy.cluster.range.valid()) load_strategy_cluster(s, "", sources, diags);
  }
  diags.render(ctx.err, ctx.color);
  return diags.has_errors() ? kExitInputErrors : kExitSuccess;
}

}  // namespace

Command add_check_command(CLI::App& root) {
  auto opts = std::make_shared<CheckOptions>();
  CLI::App* sub = root.add_subcommand("check", "Check .dstrat files and report every diagnostic");
  sub->add_option("files", opts->files, ".dstrat files to check")->required();
  sub->add_option("-D", opts->defines, "Set a model or strategy parameter: -D name=value")->allow_extra_args(false);
  return {sub, [opts](CommandContext& ctx) { return run_check(ctx, *opts); }};
}

}  // namespace dstc
