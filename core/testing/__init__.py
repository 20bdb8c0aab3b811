"""Conformance suites a plugin author runs against their own backend (pytest), and helpers for tests.

- ``blobstate.testing.blobstores``: the ``BlobStore`` contract.
- ``blobstate.testing.checkpoint_logs``: the ``CheckpointLog`` contract.
- ``blobstate.testing.local_stores``: the ``LocalStore`` contract.

Each takes one shape (``blobstate.testing.kit.ContractKit``): implement the contract class's one abstract factory.
"""
