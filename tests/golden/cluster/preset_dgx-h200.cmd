cluster stdlib/clusters/dgx-h200.toml
