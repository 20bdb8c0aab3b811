"""An alias of ``blobstate.config.options``, where this module lives since issue 40 (configuration on the ground
floor), kept for third-party plugins that import ``blobstate.repository.options``; new code imports
``blobstate.config.options``. Resolved on first use."""

from blobstate.plugin.records import moved_to

__getattr__, __dir__ = moved_to("blobstate.config.options")
