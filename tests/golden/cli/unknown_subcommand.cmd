chek examples/none.dstrat
