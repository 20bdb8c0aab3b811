"""The data model and its formats: store keys and checkpoint records of every kind, the snapshot index,
changelogs, chains of records, the repository layout, which state a batch sees (the Align door).
Pure: nothing here does I/O beyond parsing bytes it is handed.

May import: ``blobstate.errors``.
"""
