compile examples/dlrm.dstrat --strategy DLRMDataParallel --emit=tree
