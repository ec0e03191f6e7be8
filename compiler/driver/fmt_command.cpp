// dstc fmt FILE...: print the files in canonical layout; --check: exit 1
// and name each file that is not canonical; -i: rewrite them in place.
#include <algorithm>
#include <ostream>

#include <fmt/format.h>

#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/driver/output_file.h"
#include "compiler/frontend/formatter.h"
#include "compiler/frontend/parser.h"
#include "compiler/frontend/program.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc {
namespace {

struct FmtOptions {
  std::vector<std::string> files;
  bool check = false;
  bool in_place = false;
};

// One file; the exit code it alone would give.
int format_one(CommandContext& ctx, const FmtOptions& opts, const std::string& path) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::string error;
  std::optional<FileId> id = sources.load(path, error, frontend::kMaxDstratBytes);
  if (!id) {
    diags.error(diag::kFileNotFound, SourceRange{}, fmt::format("cannot read '{}': {}", path, error));
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
    ctx.err << fmt::format("{}: would be reformatted by dstc fmt\n", path);
    return kExitInputErrors;
  }
  if (opts.in_place) {
    if (formatted == original) return kExitSuccess;
    std::string failure = write_file_atomically(path, [&](std::ostream& out) { out << formatted; });
    if (!failure.empty()) {
      ctx.err << fmt::format("dstc fmt: error: cannot write '{}': {}\n", path, failure);
      return kExitInputErrors;
    }
    return kExitSuccess;
  }
  ctx.out << formatted;
  return kExitSuccess;
}

// Every file, even after one fails, so that --check names them all.
int run_fmt(CommandContext& ctx, const FmtOptions& opts) {
  int code = kExitSuccess;
  for (const std::string& path : opts.files) code = std::max(code, format_one(ctx, opts, path));
  return code;
}

}  // namespace

Command add_fmt_command(CLI::App& root) {
  auto opts = std::make_shared<FmtOptions>();
  CLI::App* sub = root.add_subcommand("fmt", "Format a .dstrat file canonically");
  sub->add_option("files", opts->files, ".dstrat files to format (printed one after another without -i)")->required();
  auto* check = sub->add_flag("--check", opts->check, "Exit 1 and name the file if it is not formatted");
  sub->add_flag("-i", opts->in_place, "Rewrite the file in place")->excludes(check);
  return {sub, [opts](CommandContext& ctx) { return run_fmt(ctx, *opts); }};
}

}  // namespace dstc
