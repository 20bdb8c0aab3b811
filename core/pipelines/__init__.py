"""The pipelines: one room per verb, and the shared steps they call.

- ``backup``   the commit of one store (``StoreCommitter``): local checkpoint, diff, upload, index, append
- ``restore``  bring a directory to exactly a snapshot's files
  (its own steps: ``restore_plan`` compares the destination with the snapshot, ``swap`` changes it all or nothing)
- ``verify``   read every blob of a snapshot and check sizes and CRC32C
- ``gc``       expired TTL blobs and old orphans, over every store of a repository
- ``recover``  the journal replay tool, and restore's init cleanup
- ``planner``  pure: scan a local checkpoint, diff against the previous index, build the new index's tree
- ``cleanup``  the journaled cleanup executor (TTL removal, deferred deletes, retention, abort, local pruning)
- ``session``  a store's lock and journal on this host

A verb imports the shared steps, never another verb (a restore never enters ``backup``).
"""
