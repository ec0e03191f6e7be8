verify tests/golden/verify/batch_norm_local.dstrat --strategy LocalBatchNormChannelSplit --arithmetic f64
