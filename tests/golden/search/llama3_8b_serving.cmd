search examples/llama3_8b_serving.dstrat --top 8
