"""A repository as the verbs see it: opening its blob store and checkpoint log by URL through the plugin
manager, with the settings of the call (storage options resolved once), the repository marker, retries of
transient faults and the translation of storage faults, this host's state of a repository.

May import: ``blobstate.errors``, ``blobstate.config``, ``blobstate.model``, ``blobstate.local``,
``blobstate.journal``, ``blobstate.plugin``, ``blobstate.codec``. Every opening takes the ``Settings`` it runs with
and keeps them (``Repository.settings``).
"""
