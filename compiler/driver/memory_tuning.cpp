#include "compiler/driver/memory_tuning.h"

#include <unistd.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cstdlib>
#include <string>

namespace dstc {

// glibc backs the heap with 4 KiB pages unless told otherwise. Compiling
// and simulating GPT-3 on 1024 GPUs then takes 84 k page faults, 6 k with
// transparent huge pages, and 1.9 s instead of 2.7 s on a virtual machine
// (bench/results/page_faults_2026-11-25.txt). glibc (2.35 and later) asks
// for them under the tunable glibc.malloc.hugetlb=1, which it reads only
// at start-up, hence the restart.
//
// glibc also maps every block over 128 KiB afresh and unmaps it on free,
// so a vector that doubles, or a search's next configuration, faults its
// pages in and zeroes them again; the heap keeps freed memory instead.
void tune_memory_allocation(char** argv) {
#ifdef __GLIBC__
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::string value = tunables ? tunables : "";
  if (value.find("glibc.malloc.hugetlb") == std::string::npos) {
    value += value.empty() ? "glibc.malloc.hugetlb=1" : ":glibc.malloc.hugetlb=1";
    if (setenv("GLIBC_TUNABLES", value.c_str(), 1) == 0) execv("/proc/self/exe", argv);
  }
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed threshold
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#else
  (void)argv;
#endif
}

}  // namespace dstc
