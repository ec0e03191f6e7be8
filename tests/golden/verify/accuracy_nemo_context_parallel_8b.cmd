verify examples/accuracy/nemo_context_parallel.dstrat --strategy Llama3_8B_CP2 -D fp8=none -D hidden=16 -D heads=4 -D kv_heads=4 -D ffn=24 -D seq=8 -D vocab=64 -D layers=2
