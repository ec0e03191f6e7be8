run examples/gpt2_megatron.dstrat -D layers=2 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64 --ranks 4
