verify examples/gpt3_175b_megatron.dstrat -D layers=4 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64 -D pp=2 -D dp=2 -D tp=2 -D micro=4 -D batch=16
