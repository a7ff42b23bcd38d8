"""Workload layer: length distributions, arrivals, traces, the scenario a plan is made for."""
