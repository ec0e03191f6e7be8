verify examples/gpt_1_5b_proteus.dstrat --strategy ProteusS2 -D layers=2 -D hidden=16 -D heads=4 -D seq=8 -D vocab=64 -D dp=4 -D pp=2 -D tp=2 -D micro=4 -D batch=16
