cluster stdlib/clusters/dgx-h100.toml --nodes 0
