verify examples/accuracy/megatron_interleaving.dstrat --strategy Interleaved -D layers=4 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64 -D pp=2 -D tp=2 -D batch=4 -D chunks=2
