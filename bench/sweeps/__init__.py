"""The reproduction pipeline: the sweeps that make the records behind every table and figure.

`python -m bench.sweeps NAME ...` (cli.py) plans a sweep's runs from its declaration (registry.py: the methods'
own `sweeps` and the named ablations), says what each run's record holds (records.py: complete, stale, a twin's
same computation), runs them inline or as submitit jobs (run.py, launch.py, order.py), and `python -m
bench.sweeps.relabel` renames a method's committed records where the computation did not change."""
