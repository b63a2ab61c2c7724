"""Benchmarks of trio_agents: each prints its ratio to a raw-trio floor measured in one run."""
