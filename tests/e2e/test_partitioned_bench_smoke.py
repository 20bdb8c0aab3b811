"""The short version of ``bench/partitioned_restore.py`` (a partitioned state restored with every partition in
parallel against the single-driver restore of the same data): it runs end to end and restores the same bytes both
ways; the times are the benchmark's, never asserted here."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_partitioned_restore_benchmark_runs_end_to_end(tmp_path, capsys):
    from bench import partitioned_restore

    out = tmp_path / "partitioned.json"
    assert partitioned_restore.main(["--size", "4MiB", "--partitions", "4", "--runs", "1", "--work",
                                     str(tmp_path / "work"), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["restore_s"]) == {"single driver", "partitions in parallel", "partitions in one process"}
    single, parallel = report["restored_bytes"]["single driver"], report["restored_bytes"]["partitions in parallel"]
    assert abs(single - parallel) < 0.05 * single  # the same records both ways (SST overhead differs a little)
    assert report["restored_bytes"]["partitions in one process"] == parallel  # the same partitions, one process
    assert len(report["partition_mb_per_s"]) == 4 and report["group_mb_per_s"] > 0
    assert "partitions in parallel" in capsys.readouterr().out
