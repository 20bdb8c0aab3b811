"""The tests the suite leaves out for its 20-minute budget on two cores: the other kill points of the Spark fault
matrices, the other placement (driver or partitioned) of a processor kill test, the Spark Connect kill variants.
The suite runs one short variant of each (the one the marker ``long`` is not on); this runs every variant marked
``long``.

``python -m bench.long_tests [pytest arguments...]`` (about 25 minutes on two cores; ``-n 2`` by default as the suite)

Exit code: pytest's."""

from __future__ import annotations

import subprocess
import sys


def command(extra: list[str]) -> list[str]:
    """The pytest command line that runs every test marked ``long`` (``extra`` appended)."""
    return [sys.executable, "-m", "pytest", "--long", "-m", "long", *extra]


def main(argv: list[str] | None = None) -> int:
    return subprocess.call(command(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    raise SystemExit(main())
