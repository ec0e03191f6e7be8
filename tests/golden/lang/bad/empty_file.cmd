check tests/golden/lang/bad/data/empty.dstrat
