search tests/golden/search/bound_space.dstrat --top 3 --simulate-all --plot -
