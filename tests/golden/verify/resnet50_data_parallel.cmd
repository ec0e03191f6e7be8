verify examples/resnet50.dstrat --strategy ResNet50DataParallel -D batch=16 -D image=32 -D width=2 -D classes=8 --arithmetic f64
