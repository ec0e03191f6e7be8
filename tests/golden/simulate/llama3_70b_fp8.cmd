compile examples/accuracy/nemo_llama3_fp8.dstrat --strategy Llama3_70B_FP8 --simulate
