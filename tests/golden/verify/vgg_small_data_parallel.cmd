verify tests/golden/verify/vgg_small.dstrat --strategy VGGSmallDataParallel
