compile examples/llama3_8b_fsdp.dstrat --simulate
