compile examples/gpt3_175b_megatron.dstrat --strategy GPT3Megatron -D micro=16
