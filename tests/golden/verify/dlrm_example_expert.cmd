verify examples/dlrm.dstrat --strategy DLRMExpert -D rows=64 -D dim=8 -D tables=3
