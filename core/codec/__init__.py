"""How a repository stores its objects: compression (zstd, per object) and client-side encryption (AES-256-GCM
with a per-repository data key), applied at the two places every object passes through, so the commit engine,
restore, maintenance and the plugins never learn about either: ``store.CodecBlobStore`` wraps the blob store
(blobs, indexes, changelogs; leases through the plugin's metadata seal) and ``log.SealedCheckpointLog`` wraps the
checkpoint log (record bodies). ``frame`` is the stored form of one object, ``cipher`` the AEAD, ``keys`` the data
key: created, wrapped by the operator's key (a key provider plugin), recorded in the repository marker, rotated.

A room of its own below ``repository`` (which opens it from the marker): it has its own dependencies
(``zstandard``; ``cryptography`` from the ``encrypt`` extra) and its own format, and nothing above the repository
imports it but the CLI's ``key`` command through the API.

May import: ``blobstate.errors``, ``blobstate.config``, ``blobstate.model``, ``blobstate.plugin`` (the interfaces,
the byte budget, the key provider records).
"""
