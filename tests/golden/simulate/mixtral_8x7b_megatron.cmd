compile examples/mixtral_8x7b_megatron.dstrat --simulate
