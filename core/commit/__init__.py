"""The commit engine: a store's journaled session, the planner (scan, diff, new index), staging with TTLs,
the commit point, healing, post-commit cleanup and retention, abort, and journal recovery; for snapshot,
delta and group records.
"""
