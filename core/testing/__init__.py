"""Conformance suites a plugin author runs against their own backend (pytest), and helpers for tests.

- ``blobstate.testing.blobstores``: the ``BlobStore`` contract.
- ``blobstate.testing.checkpoint_logs``: the ``CheckpointLog`` contract.
- ``blobstate.testing.local_stores``: the ``LocalStore`` contract.

Each takes one shape (``blobstate.testing.kit.ContractKit``): implement the contract class's one abstract factory.

May import: every room of the package (it exercises them, the simulator through the real pipelines):
``blobstate.errors``, ``blobstate.model``, ``blobstate.local``, ``blobstate.journal``, ``blobstate.plugin``,
``blobstate.codec``, ``blobstate.repository``, ``blobstate.commit``, ``blobstate.restoring``,
``blobstate.maintenance``, ``blobstate.plugins``, ``blobstate.api``, ``blobstate.worker``, ``blobstate.spark``.
"""
