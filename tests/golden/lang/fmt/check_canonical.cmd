fmt --check examples/gpt2_megatron.dstrat
