"""Simulator layer: discrete-event replay of one trace through each serving style."""
