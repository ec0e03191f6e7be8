// Subcommands whose implementing stage is not in this build yet. Each is
// listed in `dstc --help`, accepts any arguments, and says plainly that it is
// not available. A stage that lands moves its command to its own file.
#include "compiler/driver/command.h"

namespace dstc {
namespace {

Command add_unavailable_command(CLI::App& root, const std::string& name, const std::string& description,
                                std::string what) {
  CLI::App* sub = root.add_subcommand(name, description);
  sub->fallthrough(false);
  sub->allow_extras();  // accept and ignore whatever follows
  return {sub, [name, what = std::move(what)](CommandContext& ctx) { return report_unavailable(ctx, name, what); }};
}

}  // namespace

Command add_run_command(CLI::App& root) {
  return add_unavailable_command(root, "run", "Execute a strategy on GPUs (not in this build: no GPU backend yet)",
                                 "the CUDA backend");
}

}  // namespace dstc
