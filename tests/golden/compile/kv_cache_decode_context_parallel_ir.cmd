compile tests/golden/verify/kv_cache_decode_context_parallel.dstrat --emit ir -D layers=1
