ir ranks --rank 1 tests/golden/ir/mlp_pipeline.ir
