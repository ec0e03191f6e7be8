verify examples/mlp_distir_pipeline.dstrat -D hidden=32 -D batch=8 --arithmetic f64 --seed 7
