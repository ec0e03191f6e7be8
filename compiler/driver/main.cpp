#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "compiler/driver/cli.h"
#include "compiler/driver/memory_tuning.h"

int main(int argc, char** argv) {
  dstc::tune_memory_allocation(argv);
  std::ios::sync_with_stdio(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  dstc::CliEnvironment env;
  env.out_is_terminal = isatty(STDOUT_FILENO) != 0;
  env.err_is_terminal = isatty(STDERR_FILENO) != 0;
  const char* no_color = std::getenv("NO_COLOR");
  env.no_color = no_color && *no_color;
  return dstc::run_cli(args, std::cout, std::cerr, env);
}
