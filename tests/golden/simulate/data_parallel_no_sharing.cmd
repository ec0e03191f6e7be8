simulate tests/golden/simulate/data_parallel_2x8.ir --cluster stdlib/clusters/a100-nvlink-2x8.toml --batch 64 --no-bandwidth-sharing
