"""An alias of ``blobstate.plugins.toolkit.native_ttl``, where this backend code lives since issue 40 (the plugin room
holds the machinery only), kept for third-party plugins that import ``blobstate.plugin.native_ttl``; new code imports
``blobstate.plugins.toolkit.native_ttl``. Resolved on first use, so the machinery never imports backend code."""

from blobstate.plugin.records import moved_to

__getattr__, __dir__ = moved_to("blobstate.plugins.toolkit.native_ttl")
