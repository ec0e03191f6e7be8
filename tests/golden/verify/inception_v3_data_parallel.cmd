verify examples/inception_v3.dstrat --strategy InceptionDataParallel -D batch=16 -D image=43 -D width=2 -D classes=8 --arithmetic f64
