// How dstc's processes (the command, the benchmarks) set up glibc's
// allocator for compilations of millions of ops.
#pragma once

namespace dstc {

// On glibc: unless GLIBC_TUNABLES already names glibc.malloc.hugetlb,
// starts the program again (argv as given) with glibc.malloc.hugetlb=1
// added, so its heap gets transparent huge pages; then keeps freed memory
// in the heap. Returns only in the process that goes on: the restarted one,
// or this one where the restart is not wanted or fails.
void tune_memory_allocation(char** argv);

}  // namespace dstc
