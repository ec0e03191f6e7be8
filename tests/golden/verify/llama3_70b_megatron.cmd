verify examples/llama3_70b_megatron.dstrat -D batch=4 -D dp=2 -D ffn=14 -D heads=4 -D hidden=8 -D kv_heads=2 -D layers=5 -D micro=2 -D pp=2 -D seq=4 -D tp=2 -D vocab=1002
