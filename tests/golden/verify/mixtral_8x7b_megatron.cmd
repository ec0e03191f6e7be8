verify examples/mixtral_8x7b_megatron.dstrat -D batch=8 -D pp=2 -D dp=2 -D ep=2 -D micro=2 -D layers=2 -D seq=8 -D hidden=16 -D heads=4 -D kv_heads=2 -D ffn=24 -D vocab=64 -D experts=4
