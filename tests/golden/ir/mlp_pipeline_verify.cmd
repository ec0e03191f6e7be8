ir verify tests/golden/ir/mlp_pipeline.ir
