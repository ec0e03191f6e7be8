// The benchmarks' main: the allocator set up as the dstc command sets it
// (compiler/driver/memory_tuning.h), so in-process figures match it.
#include <benchmark/benchmark.h>

#include "compiler/driver/memory_tuning.h"

int main(int argc, char** argv) {
  dstc::tune_memory_allocation(argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
