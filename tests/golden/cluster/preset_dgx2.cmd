cluster stdlib/clusters/dgx2.toml
