simulate tests/golden/simulate/pipeline_tp.ir --cluster stdlib/clusters/dgx-a100.toml --batch 16 --seq 512 --format json
