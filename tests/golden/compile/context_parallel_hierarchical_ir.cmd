compile tests/golden/verify/context_parallel_hierarchical.dstrat --emit ir -D layers=1
