// What each dstc subcommand provides to the driver: its CLI11 sub-app (with
// options bound to storage the command owns) and the action run when the
// user chose it.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dstc {

struct CommandContext {
  std::ostream& out;
  std::ostream& err;
  bool color = false;  // colour diagnostics on err
  bool out_is_terminal = false;
  bool err_is_terminal = false;
};

struct Command {
  CLI::App* app = nullptr;
  std::function<int(CommandContext&)> run;
};

// One function per subcommand, each in its own *_command.cpp file.
Command add_check_command(CLI::App& root);
Command add_fmt_command(CLI::App& root);
Command add_compile_command(CLI::App& root);
Command add_verify_command(CLI::App& root);
Command add_search_command(CLI::App& root);
Command add_run_command(CLI::App& root);
Command add_calibrate_command(CLI::App& root);
Command add_ir_command(CLI::App& root);
Command add_cluster_command(CLI::App& root);
Command add_schedule_command(CLI::App& root);
Command add_simulate_command(CLI::App& root);

// A validator, applied with ->transform, for an option that takes one word
// of `choices` (lower case): any case is accepted, and a misspelt word gets
// the list and a "did you mean".
CLI::Validator one_of(std::vector<std::string> choices);

// A validator for an option naming a file to write: an empty path is a
// usage error, not a silently skipped output.
CLI::Validator non_empty_path();

// A transform for an option naming a file to read: a relative path that is
// not found from the working directory is looked up under the stdlib, as a
// .dstrat file's `on "clusters/dgx-a100.toml"` is.
CLI::Validator found_in_stdlib();

}  // namespace dstc
