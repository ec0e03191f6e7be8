verify examples/gpt2_hsdp.dstrat -D layers=2 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64 -D rep=2 -D shard=2
