// dstc fmt FILE: print the file in canonical layout; --check: exit 1 and
// name the file when it is not canonical; -i: rewrite it in place.
#include <ostream>

#include <fmt/format.h>

#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/driver/output_file.h"
#include "compiler/frontend/formatter.h"
#include "compiler/frontend/frontend_diagnostics.h"
#include "compiler/frontend/parser.h"
#include "compiler/frontend/program.h"

namespace dstc {
namespace {

struct FmtOptions {
  std::string file;
  bool check = false;
  bool in_place = false;
};

int run_fmt(CommandContext& ctx, const FmtOptions& opts) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::string error;
  std::optional<FileId> id = sources.load(opts.file, error, frontend::kMaxDstratBytes);
  if (!id) {
    diags.error(frontend::diag::kFileNotFound, SourceRange{}, fmt::format("cannot read '{}': {}", opts.file, error));
    diags.render(ctx.err, ctx.color);
    return kExitInputErrors;
  }
  std::optional<frontend::FileAst> ast = frontend::parse_file(*id, diags);
  if (!ast) {
    diags.render(ctx.err, ctx.color);
    return kExitInputErrors;
  }
  std::string formatted = frontend::format_file(*ast, sources);
  const std::string& original = sources.file(*id).text;
  if (opts.check) {
    if (formatted == original) return kExitSuccess;
    ctx.err << fmt::format("{}: would be reformatted by dstc fmt\n", opts.file);
    return kExitInputErrors;
  }
  if (opts.in_place) {
    if (formatted == original) return kExitSuccess;
    std::string failure = write_file_atomically(opts.file, [&](std::ostream& out) { out << formatted; });
    if (!failure.empty()) {
      ctx.err << fmt::format("dstc fmt: error: cannot write '{}': {}\n", opts.file, failure);
      return kExitInputErrors;
    }
    return kExitSuccess;
  }
  ctx.out << formatted;
  return kExitSuccess;
}

}  // namespace

Command add_fmt_command(CLI::App& root) {
  auto opts = std::make_shared<FmtOptions>();
  CLI::App* sub = root.add_subcommand("fmt", "Format a .dstrat file canonically");
  sub->add_option("file", opts->file, ".dstrat file to format")->required();
  auto* check = sub->add_flag("--check", opts->check, "Exit 1 and name the file if it is not formatted");
  sub->add_flag("-i", opts->in_place, "Rewrite the file in place")->excludes(check);
  return {sub, [opts](CommandContext& ctx) { return run_fmt(ctx, *opts); }};
}

}  // namespace dstc
