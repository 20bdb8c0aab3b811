"""Maintenance over a whole repository: garbage collection, verification, the read-only verbs (list, ls,
diff, stats, journals).
"""
