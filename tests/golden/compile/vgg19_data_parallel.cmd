compile examples/vgg19.dstrat --strategy VGG19DataParallel --emit=tree
