"""``python -m bench``: the benchmark command line (see ``bench/run.py``)."""

import sys

from bench.run import main

sys.exit(main())
