compile examples/gpt2_3d_1f1b.dstrat --strategy GPT2ThreeD
