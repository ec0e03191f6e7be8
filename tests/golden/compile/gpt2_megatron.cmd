compile examples/gpt2_megatron.dstrat --strategy GPT2Megatron
