fmt tests/golden/lang/fmt/data/fuzz_bom_crash.dstrat
