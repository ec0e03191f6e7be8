verify examples/llama3_8b_serving.dstrat --strategy Llama3_8B_LongContextDecode -D cp=2 -D tp=2 -D batch=2 -D context=5 -D hidden=32 -D heads=4 -D kv_heads=2 -D ffn=48 -D layers=2 -D vocab=64
