compile examples/vgg19.dstrat --strategy VGG19Expert --emit=tree
