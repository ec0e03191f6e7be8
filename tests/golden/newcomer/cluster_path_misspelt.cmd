cluster clusters/dgx-a10.toml
