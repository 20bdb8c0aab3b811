"""Restore: compare a destination with a snapshot, download what it lacks, swap it into place all or
nothing, and replay a chain of deltas on top of a snapshot.
"""
