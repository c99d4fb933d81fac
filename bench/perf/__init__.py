"""Performance benchmarks: time, throughput, MFU, memory and input pipelines, each printing its figures and writing
them under bench/results (bench/result_file.py) with the command and environment that made them. Timed figures are
compared as ratios measured in one run, never asserted in tests."""
