verify examples/accuracy/meta_context_parallel_inference.dstrat --strategy Llama3_405B_Prefill -D fp8=none -D cp=2 -D prompt=16 -D hidden=64 -D heads=8 -D kv_heads=8 -D ffn=24 -D layers=2 -D vocab=64
