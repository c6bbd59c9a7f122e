"""`python -m studio.cli`: the same as the installed `scellis`."""
import sys

from . import main

sys.exit(main())
