compile examples/mlp_dtp.dstrat --strategy DTP --emit=tree
