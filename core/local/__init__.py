"""Local files: the work directory (journals, local checkpoints, restore destinations), the checksum cache,
safe names and durable directory writes, this host's object cache, and scratch directories held by a lock while
used and swept once abandoned (``held``).

May import: ``blobstate.errors``, ``blobstate.config``, ``blobstate.model``.
"""
