#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "compiler/driver/cli.h"

namespace {

// glibc backs the heap with 4 KiB pages unless told otherwise. Compiling
// and simulating GPT-3 on 1024 GPUs touches 600 MB: 160 k page faults,
// which on a virtual machine took 40 % of the run. glibc (2.35 and later)
// asks the kernel for transparent huge pages under the tunable
// glibc.malloc.hugetlb=1, which it reads only at start-up, so dstc starts
// itself again once with the tunable set (where the user has not set it).
// Should the restart fail, dstc simply runs as it is.
void restart_with_huge_pages(char** argv) {
#ifdef __GLIBC__
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::string value = tunables ? tunables : "";
  if (value.find("glibc.malloc.hugetlb") != std::string::npos) return;
  value += value.empty() ? "glibc.malloc.hugetlb=1" : ":glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
#else
  (void)argv;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  restart_with_huge_pages(argv);
  std::ios::sync_with_stdio(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  dstc::CliEnvironment env;
  env.out_is_terminal = isatty(STDOUT_FILENO) != 0;
  env.err_is_terminal = isatty(STDERR_FILENO) != 0;
  int code = dstc::run_cli(args, std::cout, std::cerr, env);
  std::cout.flush();
  return code;
}
