"""The scales a task comes at (tasks/registry.py says what each is), importable without torch: run.py's and the
sweeps' command lines take their choices and default from here."""

SCALES = ("paper", "regime", "mini", "tiny")
EMBEDDED_SCALES = ("regime", "mini", "tiny")   # on the data that comes with the install: no hub, no download
DEFAULT_SCALE = "regime"                       # what run.py and the sweeps run without --scale
PAIRS_OF = {"regime": "mini"}                  # a scale that trains another scale's pairs (longer), but where a pair
                                               # gives its own sizes there (tasks/registry.py PAIRS)
