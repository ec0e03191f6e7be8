cluster stdlib/clusters/dgx-a100.toml
