cluster stdlib/clusters/a100-nvlink-2x8.toml
