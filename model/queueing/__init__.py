"""Queueing layer: M/G/c and friends, decode-batch models, latency distributions."""
