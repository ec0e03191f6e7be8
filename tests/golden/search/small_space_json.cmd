search tests/golden/search/small_space.dstrat --top 3 --json -
