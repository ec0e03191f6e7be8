verify examples/qwen3_30b_a3b_expert_parallel.dstrat -D batch=8 -D dp=2 -D micro=2 -D seq=8 -D hidden=16 -D heads=4 -D kv_heads=2 -D expert_ffn=8 -D layers=2 -D vocab=64 -D experts=4 -D top_k=2
