"""Restore: compare a destination with a snapshot, download what it lacks, swap it into place all or
nothing, and replay a chain of deltas on top of a snapshot.

May import: ``blobstate.errors``, ``blobstate.model``, ``blobstate.local``, ``blobstate.plugin``,
``blobstate.repository``; never the commit engine or maintenance (siblings): a restore never enters a backup.
"""
