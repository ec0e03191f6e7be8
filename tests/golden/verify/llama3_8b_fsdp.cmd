verify examples/llama3_8b_fsdp.dstrat -D batch=2 -D dp=2 -D ffn=56 -D heads=2 -D hidden=16 -D kv_heads=2 -D layers=2 -D seq=32 -D vocab=501
