compile examples/dlrm.dstrat --strategy DLRMExpert --emit=tree
