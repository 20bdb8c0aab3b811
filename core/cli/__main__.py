"""``python -m blobstate.cli``: the ``blobstate`` command."""

from blobstate.cli import main

main()
