cluster stdlib/clusters/dgx-a100.toml --nodes 2147483648
