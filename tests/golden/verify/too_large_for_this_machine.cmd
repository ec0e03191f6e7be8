verify examples/gpt2_megatron.dstrat --max-memory 1
