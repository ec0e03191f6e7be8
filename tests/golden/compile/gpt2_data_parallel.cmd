compile examples/gpt2_data_parallel.dstrat --strategy GPT2DataParallel
