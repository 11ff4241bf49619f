"""Benchmarks of Waystation's machinery against raw Temporal baselines."""
