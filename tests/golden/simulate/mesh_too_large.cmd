simulate tests/golden/simulate/data_parallel_2x8.ir --cluster stdlib/clusters/dgx-a100.toml
