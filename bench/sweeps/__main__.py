"""`python -m bench.sweeps`: the command line of cli.py."""
import sys

from bench.sweeps.cli import main

sys.exit(main())
