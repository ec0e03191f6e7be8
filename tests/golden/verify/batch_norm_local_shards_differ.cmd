verify tests/golden/verify/batch_norm_local.dstrat --strategy LocalBatchNormShardsDiffer --arithmetic f64
