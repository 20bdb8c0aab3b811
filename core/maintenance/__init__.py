"""Maintenance over a whole repository: garbage collection, verification, the read-only verbs (list, ls,
diff, stats, the state as data, journals), doctor.

May import: ``blobstate.errors``, ``blobstate.config``, ``blobstate.model``, ``blobstate.local``,
``blobstate.journal``, ``blobstate.plugin``, ``blobstate.codec``, ``blobstate.repository``, ``blobstate.entry``
(the read verbs name their store and open their repository there).
"""
