verify tests/golden/verify/tied_pipeline.dstrat --strategy Replicate
