// dstc ir verify|print|ranks|dot FILE.ir: work on explicit-schedule IR text.
#include <fmt/format.h>

#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "ir/dot.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/projection.h"
#include "ir/verifier.h"

namespace dstc {

namespace {

struct IrOptions {
  std::string action;
  std::string file;
  int rank = -1;
  std::string function;
};

int run_ir(CommandContext& ctx, const IrOptions& opts) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<ir::Module> module = ir::parse_file(sources, opts.file, diags);
  bool ok = module.has_value();
  // print shows what was parsed; the others need a well-formed module.
  if (ok && opts.action != "print") ok = ir::verify_module(*module, diags);
  diags.render(ctx.err, ctx.color);
  if (!ok) return kExitInputErrors;

  if (opts.action == "print") {
    ctx.out << ir::print_module(*module);
  } else if (opts.action == "verify") {
    size_t ops = 0;
    for (const ir::Function& f : module->functions) ops += f.ops.size();
    ctx.out << fmt::format("{}: ok ({} function(s), {} ops, {} devices)\n", opts.file, module->functions.size(), ops,
                           module->mesh().size());
  } else if (opts.action == "dot") {
    ctx.out << ir::export_dot(*module);
  } else if (opts.action == "ranks") {
    if (opts.rank >= module->mesh().size()) {
      ctx.err << fmt::format("dstc ir ranks: error: --rank {} is outside the mesh of {} devices\n", opts.rank,
                             module->mesh().size());
      return kExitUsage;
    }
    bool first = true;
    for (const ir::Function& f : module->functions) {
      if (!opts.function.empty() && f.name != opts.function) continue;
      std::vector<ir::RankProgram> programs;
      if (opts.rank >= 0)
        programs.push_back(ir::project_rank(*module, f, opts.rank));
      else
        programs = ir::project_ranks(*module, f);
      for (const ir::RankProgram& program : programs) {
        if (!first) ctx.out << "\n";
        first = false;
        ctx.out << ir::print_rank_program(*module, f, program);
      }
    }
  }
  return kExitSuccess;
}

}  // namespace

Command add_ir_command(CLI::App& root) {
  CLI::App* ir = root.add_subcommand("ir", "Verify, print, project and draw explicit-schedule IR files");
  ir->require_subcommand(1, 1);
  auto opts = std::make_shared<IrOptions>();
  struct Action {
    const char* name;
    const char* description;
  };
  const Action actions[] = {
      {"verify", "Check SSA, types, placement, collective groups, send/recv pairing and deadlock freedom"},
      {"print", "Print the file in canonical IR text form"},
      {"ranks", "Print each rank's own program (rank projection)"},
      {"dot", "Print the dependency graph as Graphviz DOT, critical path by FLOPs in red"},
  };
  for (const Action& a : actions) {
    CLI::App* sub = ir->add_subcommand(a.name, a.description);
    sub->add_option("file", opts->file, "The .ir file")->required();
    if (std::string_view(a.name) == "ranks") {
      sub->add_option("--rank", opts->rank, "Print only this rank's program")->check(CLI::NonNegativeNumber);
      sub->add_option("--function", opts->function, "Print only this function");
    }
    sub->callback([opts, name = std::string(a.name)] { opts->action = name; });
  }
  return {ir, [opts](CommandContext& ctx) { return run_ir(ctx, *opts); }};
}

}  // namespace dstc
