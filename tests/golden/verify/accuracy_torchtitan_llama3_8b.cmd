verify examples/accuracy/torchtitan_llama3_8b.dstrat -D seq=8 -D hidden=16 -D heads=4 -D kv_heads=2 -D ffn=24 -D layers=2 -D vocab=64
