compile tests/golden/verify/context_parallel_ring.dstrat --emit ir -D layers=1 -D dp=1 -D recompute=true
