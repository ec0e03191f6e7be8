verify tests/golden/verify/resnet_small.dstrat --strategy ResNetSmallExpert
