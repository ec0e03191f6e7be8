verify examples/accuracy/activation_memory.dstrat --strategy SequenceParallel -D tp=2 -D layers=2 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64
