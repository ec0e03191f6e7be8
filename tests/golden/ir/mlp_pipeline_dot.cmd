ir dot tests/golden/ir/mlp_pipeline.ir
