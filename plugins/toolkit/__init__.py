"""The toolkit the built-in blob stores are made of, and a third party's may be: ``native_ttl`` (the cloud stores'
base: native TTL marks, bucket and prefix, bulk deletes), ``transfer`` (streaming obstore transfers within a byte
budget, and the rate limiters), ``local_files`` (the durable, contained file repository under ``file://``).

Backend code, not plugin machinery: it moved here from ``blobstate.plugin`` (issue 40), whose old module names are
kept as aliases (``blobstate.plugin.native_ttl``, ``blobstate.plugin.transfer``, ``blobstate.plugin.local_files``).

May import: ``blobstate.errors``, ``blobstate.config``, ``blobstate.model``, ``blobstate.local``,
``blobstate.plugin`` (the interfaces, ``inflight``) and the built-in ``blobstate.plugins.fsspec_store`` it extends;
never the repository, the commit engine, restore or maintenance.
"""
