compile examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_8B_FSDP_FP8 --simulate
