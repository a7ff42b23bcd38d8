"""Fleet-level studies above the planner: load over a day (``schedule``: pool sizes per time bin from
one plan's scaling tables, GPU-hours against static provisioning) and grids of scenarios
(``sweep``: many plans into one tidy table, on a process pool or a Ray cluster)."""
