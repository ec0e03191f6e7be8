check examples/gpt2_megatron.dstrat -D layer=2
