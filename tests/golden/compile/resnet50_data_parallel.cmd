compile examples/resnet50.dstrat --strategy ResNet50DataParallel
