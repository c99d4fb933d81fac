"""Benchmarks and sweeps, run by hand (DESIGN.md §1): `python -m bench.sweeps --list` shows the sweeps behind
every table and figure of the paper; results are written down (REPRODUCE.md), never timed in tests."""
