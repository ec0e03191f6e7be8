verify examples/vgg19.dstrat --strategy VGG19Expert -D batch=8 -D image=32 -D width=2 -D fc_width=16 -D classes=8
