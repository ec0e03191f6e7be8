run examples/gpt2_megatron.dstrat --device cuda
