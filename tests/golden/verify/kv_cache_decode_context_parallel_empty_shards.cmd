verify tests/golden/verify/kv_cache_decode_context_parallel.dstrat -D cp=4 -D context=1 -D tp=1
