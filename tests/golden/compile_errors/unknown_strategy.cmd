compile examples/gpt2_megatron.dstrat --strategy NoSuchStrategy
