verify examples/mlp_dtp.dstrat -D hidden=16
