cluster stdlib/clusters/v100-nvlink-4x8.toml
