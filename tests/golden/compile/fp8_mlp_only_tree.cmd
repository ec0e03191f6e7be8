compile tests/golden/verify/fp8_mlp_only.dstrat --emit tree
