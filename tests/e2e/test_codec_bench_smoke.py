"""The short version of ``bench/codec.py`` (compression's stored bytes and time, encryption's cost): it runs end to
end on a tiny state and reports every case; the numbers themselves are the benchmark's, never asserted here."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_codec_benchmark_runs_end_to_end(tmp_path, capsys):
    from bench import codec

    out = tmp_path / "codec.json"
    assert codec.main(["--size", "2MiB", "--compress-size", "1MiB", "--runs", "1", "--skip-flights",
                       "--throughput-size", "1MiB",
                       "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert len(report["compression"]) == 3
    for case in report["compression"].values():
        assert case["off"]["stored_bytes"] > 0 and case["auto"]["stored_bytes"] > 0
    assert set(report["encryption"]) >= {"plain", "encrypted", "backup_ratio", "restore_ratio"}
    assert "| restore |" in capsys.readouterr().out
