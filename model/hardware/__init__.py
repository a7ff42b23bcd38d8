"""Hardware layer: GPU, link and node profiles (with sources), collectives, numeric formats."""
