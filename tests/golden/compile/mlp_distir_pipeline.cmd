compile examples/mlp_distir_pipeline.dstrat --strategy TwoStagePipeline --emit=tree
