compile examples/mixtral_8x7b_megatron.dstrat --simulate -D capacity=4096 -D skew=0.5
