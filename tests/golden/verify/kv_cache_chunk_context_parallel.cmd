verify tests/golden/verify/kv_cache_decode_context_parallel.dstrat -D cp=3 -D context=3 -D seq=2
