"""The short version of ``bench/cli_startup.py`` (``blobstate backup`` of an unchanged store against ``python -c
pass`` and the in-process commit): it runs end to end on a tiny store; the timings are the benchmark's, never
asserted here."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_cli_startup_benchmark_runs_end_to_end(tmp_path, capsys):
    from bench import cli_startup

    out = tmp_path / "cli-startup.json"
    assert cli_startup.main(["--size", "1MiB", "--runs", "1", "--warmup", "0", "--importtime", "1",
                             "--work", str(tmp_path / "w"), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    for row in ("python_c_pass", "backup_unchanged"):
        assert report[row]["cpu_ms"] > 0 and report[row]["wall_ms"] > 0
    assert report["commit_ms"] > 0 and set(report["target_ms"]) == {"wall_ms", "cpu_ms"}
    assert report["in_process"]["duration_ms"] > 0 and report["in_process"]["call_cpu_ms"] > 0
    assert report["imports"]["modules"] > 100 and "blobstate" in report["imports"]["by_package_ms"]
    assert "fsspec" not in report["imports"]["by_package_ms"]  # a file:// backup
    assert "warm process" in capsys.readouterr().out
