verify tests/golden/verify/tied_pipeline.dstrat --strategy Transmit
