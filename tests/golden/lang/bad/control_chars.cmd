check tests/golden/lang/bad/data/control_chars.dstrat
