"""The fault probe, beside the tests: bad input and faults of every class run end to end as subprocesses at the tiny
scale (`python -m tests.fault_probe`, from the repository's root); tests/test_faults.py checks the same classes in
process."""
