"""Benchmark harness for blobstate: backup and restore of real RocksDB states, side by side with restic, rclone,
RocksDB's BackupEngine (``ldb``), a changelog replay, and the physical limit (``cp -a``; raw parallel s3fs).

Run ``python -m bench --help``; results go to ``bench/results/`` (JSON, Markdown, PNG).
"""
