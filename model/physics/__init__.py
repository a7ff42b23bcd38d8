"""Physics layer: roofline FLOPs, bytes and time of prefill, decode and mixed steps; memory fit."""
