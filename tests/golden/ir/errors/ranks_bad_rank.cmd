ir ranks --rank 2 tests/golden/ir/mlp_pipeline.ir
