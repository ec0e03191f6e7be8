cluster stdlib/clusters/titanxp-pcie-8.toml --nodes 2
