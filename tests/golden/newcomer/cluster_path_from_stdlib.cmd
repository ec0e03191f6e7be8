cluster clusters/dgx-a100.toml --nodes 2
