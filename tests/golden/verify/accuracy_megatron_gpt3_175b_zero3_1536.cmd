verify examples/accuracy/megatron_gpt3_175b_zero3.dstrat --strategy ZeRO3x1536 -D layers=2 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64 -D batch=16 -D dp=2
