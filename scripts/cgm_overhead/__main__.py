"""`python3 -m cgm_overhead ARGS`: what scripts/cgm-overhead runs."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
