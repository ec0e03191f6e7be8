verify tests/golden/verify/dlrm_small.dstrat --strategy DLRMSmallExpert
