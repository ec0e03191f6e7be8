verify examples/mlp_distir_pipeline.dstrat --arithmetic f16
