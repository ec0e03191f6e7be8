check tests/golden/lang/bad/no_such_file.dstrat
