verify tests/golden/verify/pointwise_ops.dstrat --strategy NewOpsHybrid
