compile examples/inception_v3.dstrat --strategy InceptionExpert --emit=tree
