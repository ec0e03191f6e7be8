// The dstc command line, callable in process (main.cpp and the golden-file
// tests both go through run_cli).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace dstc {

// Exit codes of every dstc command.
enum ExitCode : int {
  kExitSuccess = 0,
  kExitInputErrors = 1,  // the input has errors (diagnostics were printed)
  kExitUsage = 2,        // bad command line
  kExitInternal = 3,     // a bug in dstc, or a feature this build lacks
};

struct CliEnvironment {
  bool out_is_terminal = false;  // stdout is a terminal (progress bars)
  bool err_is_terminal = false;  // stderr is a terminal (colour diagnostics)
  bool no_color = false;         // NO_COLOR is set (no-color.org): --color=auto means never
};

// args excludes the program name. Output that cannot be written (`out` fails,
// as on a full disk) makes the command fail with kExitInputErrors.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const CliEnvironment& env = {});

}  // namespace dstc
