compile tests/golden/compile/llama3_8b_h200_profile.dstrat --simulate --profile profiles/h100-sxm.toml
