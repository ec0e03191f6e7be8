verify tests/golden/verify/kv_cache_decode_context_parallel.dstrat -D cp=3 -D context=2 -D pp=2 -D dp=2 -D micro=2
