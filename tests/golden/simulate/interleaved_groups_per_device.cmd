simulate tests/golden/simulate/interleaved_groups.ir --cluster stdlib/clusters/dgx-a100.toml --nodes 2 --no-symmetry
