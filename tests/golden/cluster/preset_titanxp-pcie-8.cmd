cluster stdlib/clusters/titanxp-pcie-8.toml
