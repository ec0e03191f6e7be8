verify examples/accuracy/megatron_gpt3_175b_ptdp.dstrat --strategy PTDP384 -D layers=4 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64 -D batch=16 -D dp=2 -D tp=2 -D pp=2 -D micro=4 -D chunks=2
