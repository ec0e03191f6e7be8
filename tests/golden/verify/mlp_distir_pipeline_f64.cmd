verify examples/mlp_distir_pipeline.dstrat -D hidden=32 --arithmetic f64 --seed 7
