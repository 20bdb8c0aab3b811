"""The data model and its formats: store keys and checkpoint records of every kind, the snapshot index,
changelogs, chains of records, the repository layout, names that may touch a disk, and human units.
Pure: nothing here does I/O beyond parsing bytes it is handed.
"""
