verify examples/mlp_distir_pipeline.dstrat -D hidden=64
