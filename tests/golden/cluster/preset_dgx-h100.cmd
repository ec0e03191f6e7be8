cluster stdlib/clusters/dgx-h100.toml
