"""The plugin machinery: hook specifications, registration records, the plugin manager (pluggy), the three
backend interfaces and their optional capabilities, requests in flight and the byte budget (``inflight``). The
toolkit blob store plugins build on (native TTL, obstore transfers, the local file repository) is backend code: it
lives in ``blobstate.plugins.toolkit``.

May import: ``blobstate.errors``, ``blobstate.config``, ``blobstate.model``, ``blobstate.journal`` (the event
type of the journal hook).

Exceptions, listed by the house's test: the manager loads the built-in plugins by reference
(``manager.BUILTIN_PLUGINS``), as it loads any entry point; ``native_ttl``, ``transfer`` and ``local_files`` here
are aliases of the plugins' toolkit, kept for third-party plugins.
"""
