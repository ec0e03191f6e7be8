verify tests/golden/verify/inception_small.dstrat --strategy InceptionSmallDataParallel
