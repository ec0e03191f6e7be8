cluster tests/golden/cluster/no_such_file.toml
