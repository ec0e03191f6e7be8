compile tests/golden/verify/kv_cache_decode_context_parallel.dstrat --explain -D layers=1
