search tests/golden/search/small_space.dstrat --search Nope
