verify examples/dlrm.dstrat --strategy DLRMDataParallel -D batch=16 -D rows=64 -D dim=8 -D tables=3 -D width=32
