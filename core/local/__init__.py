"""Local files: the work directory (journals, local checkpoints, restore destinations), the checksum cache,
safe names and durable directory writes.

May import: ``blobstate.errors``, ``blobstate.config``, ``blobstate.model``.
"""
