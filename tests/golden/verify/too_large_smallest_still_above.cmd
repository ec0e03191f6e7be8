verify examples/gpt2_megatron.dstrat -D layers=2 -D hidden=32 -D heads=4 -D seq=8 -D vocab=64 --max-memory 0.0001
