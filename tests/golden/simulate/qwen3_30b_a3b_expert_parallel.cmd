compile examples/qwen3_30b_a3b_expert_parallel.dstrat --simulate
