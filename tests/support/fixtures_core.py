"""Core fixtures: temporary repositories, RocksDB stores made with rocksdict, the CLI as a real subprocess."""
