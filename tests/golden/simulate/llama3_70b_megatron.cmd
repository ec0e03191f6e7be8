compile examples/llama3_70b_megatron.dstrat --simulate
