"""Built-in plugins of blobstate, each registered exactly like a third-party plugin.

``blobstate.plugins.registry.KNOWN_IMPLEMENTATIONS`` is the one registration table of the built-in backends (names
and dotted paths only); ``registry.builtin_plugins()`` gives the plugin objects the manager registers, under the
names ``blobstate plugins`` shows. The implementations in the other modules here are imported only when their
backend is opened; ``steplog`` is a built-in observer.

May import: ``blobstate.errors``, ``blobstate.config``, ``blobstate.model``, ``blobstate.local``,
``blobstate.plugin`` (the stable interfaces and records), ``blobstate.codec`` (the key file provider's cipher) and
``blobstate.repository`` (the file log opening a blob store of its own); never the verbs' rooms. The backends'
toolkit is ``blobstate.plugins.toolkit``.
"""
