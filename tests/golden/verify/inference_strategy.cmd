verify examples/search_gpt2_inference.dstrat --strategy GPT2Inference
