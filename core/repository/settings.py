"""An alias of ``blobstate.config.settings``, where this module lives since issue 40 (configuration on the ground
floor), kept for third-party plugins that import ``blobstate.repository.settings``; new code imports
``blobstate.config.settings``. Resolved on first use."""

from blobstate.plugin.records import moved_to

__getattr__, __dir__ = moved_to("blobstate.config.settings")
