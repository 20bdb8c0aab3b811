"""A repository as the verbs see it: opening its blob store and checkpoint log by URL through the plugin
manager, the repository marker, retries of transient faults, storage options and their redaction.
"""
