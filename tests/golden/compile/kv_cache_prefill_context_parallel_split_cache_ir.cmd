compile tests/golden/verify/kv_cache_prefill_context_parallel_split_cache.dstrat --emit ir -D layers=1
