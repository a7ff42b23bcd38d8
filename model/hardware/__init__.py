"""Hardware layer: GPU, link, node and serving-engine profiles (with sources), collectives, numeric
formats. Modules: schema (TOML validation), gpus, links, nodes, engines (one dataclass and loader
each), catalog (HardwareCatalog, load_catalog, get_gpu/get_link/get_node/get_engine), collectives,
formats."""
