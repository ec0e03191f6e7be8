fmt --check tests/golden/lang/fmt/messy.dstrat examples/gpt2_megatron.dstrat tests/golden/lang/fmt/messy.dstrat
