verify examples/llama3_405b_meta.dstrat -D batch=8 -D dp=2 -D pp=2 -D tp=2 -D micro=4 -D v=2 -D hidden=8 -D heads=4 -D kv_heads=2 -D ffn=14 -D layers=8 -D seq=4 -D vocab=1002
