compile examples/llama3_8b_serving.dstrat --strategy Llama3_8B_LongContextDecode --simulate
