fmt --check tests/golden/lang/fmt/messy.dstrat
