"""The commit engine: a store's journaled session, the planner (scan, diff, new index), staging with TTLs,
the commit point, healing, post-commit cleanup and retention, abort, and journal recovery; for snapshot,
delta and group records.

May import: ``blobstate.errors``, ``blobstate.config``, ``blobstate.model``, ``blobstate.local``,
``blobstate.journal``, ``blobstate.plugin``, ``blobstate.codec`` (a copy's staging sealed), ``blobstate.repository``;
never restore or maintenance (siblings), the entry room or the API above. It runs with the settings of the repository
it is handed.
"""
