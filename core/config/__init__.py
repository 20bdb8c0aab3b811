"""Configuration, on the ground floor: the ``Settings`` a command or an API call runs with (``settings``: the
``BLOBSTATE_*`` environment read in one place, the CLI's options and the API's keywords), storage options and
their redaction (``options``), and human units for sizes and durations (``units``).

May import: ``blobstate.errors`` only. Every room above reads its configuration from what it is handed (a
``Settings``, a plain value), never from here at run time; nothing here imports a room above it.
"""
