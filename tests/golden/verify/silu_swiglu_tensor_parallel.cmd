verify tests/golden/verify/silu_swiglu.dstrat --strategy SwiGluTensorParallel
