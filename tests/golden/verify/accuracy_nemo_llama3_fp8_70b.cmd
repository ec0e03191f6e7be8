verify examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_70B_FP8 -D fp8=none -D batch=32 -D hidden=16 -D heads=4 -D kv_heads=4 -D ffn=24 -D seq=8 -D vocab=64 -D layers=40
