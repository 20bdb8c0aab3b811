"""The short version of ``bench/hashcost.py`` (the content hash's cost on incremental backups): it runs end to end
and reports both variants; the numbers themselves are the benchmark's, never asserted here."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_hashcost_benchmark_runs_end_to_end(tmp_path, capsys):
    from bench import hashcost

    out = tmp_path / "hashcost.json"
    assert hashcost.main(["--size", "4MiB", "--keys", "2000", "--runs", "1", "--dir-files", "20",
                          "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    for key in ("rocksdb_incremental_1pct", "dir_incremental_1pct"):
        assert set(report[key]["scan_s"]) == {"crc32c only", "crc32c + xxh3-128"}
    assert "its scan alone" in capsys.readouterr().out
