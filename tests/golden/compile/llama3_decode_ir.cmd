compile examples/llama3_8b_serving.dstrat --strategy Llama3_8B_Decode --emit ir -D dp=1 -D tp=2 -D batch=2 -D context=6 -D hidden=16 -D heads=4 -D kv_heads=2 -D ffn=16 -D layers=1 -D vocab=32
