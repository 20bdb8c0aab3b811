"""Smoke test of the benchmark harness (bench/): a whole run on a tiny RocksDB state (4 MiB), every tool on
file:// and on a real moto S3 server (the changelog replay also from a real Kafka 0.9.0.1 broker), then checks
that the JSON holds every operation with sane numbers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

# One benchmark run (the module fixture) serves every test here: on one pytest-xdist worker, it runs once.
pytestmark = pytest.mark.xdist_group("bench-smoke")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from bench.run import OPS  # noqa: E402
from bench.tools import ALL_TOOLS  # noqa: E402

NEEDED = ("restic", "rclone", "ldb", "blobstate", "/usr/bin/time")


def this_interpreters_path() -> dict[str, str]:
    """The environment with this interpreter's ``bin`` first on PATH: the harness runs ``blobstate`` by name, and
    it must be the installation under test, not another one earlier on PATH."""
    return {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}


@pytest.fixture(scope="module")
def bench_doc(tmp_path_factory):
    missing = [b for b in NEEDED if shutil.which(b) is None]
    if missing:
        pytest.skip(f"benchmark tools missing: {missing} (run .ci/install-bench.sh)")
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    pytest.importorskip("matplotlib")
    from bench import kafka_changelog

    reason = kafka_changelog.missing()
    if reason:
        pytest.skip(f"changelog-kafka cannot run: {reason}")
    work = tmp_path_factory.mktemp("bench-work")
    out = tmp_path_factory.mktemp("bench-out")
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--size", "4MiB", "--keys", "4000", "--runs", "1", "--cache", "warm",
         "--delta-commits", "5", "--work", str(work), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=this_interpreters_path(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "latest.json") as fh:
        doc = json.load(fh)
    return doc, out


def expected_keys() -> set[tuple[str, str, str]]:
    return {(backend, tool.name, op) for tool in ALL_TOOLS for backend in tool.backends for op in tool.ops}


def test_every_operation_measured_without_error(bench_doc):
    doc, _ = bench_doc
    rows = {(r["backend"], r["tool"], r["op"]): r for r in doc["results"]}
    assert set(rows) == expected_keys()
    errors = {k: r["error"] for k, r in rows.items() if r["error"]}
    assert not errors
    assert {op for (_b, t, op) in rows if t == "blobstate"} == set(OPS)


def test_numbers_are_sane(bench_doc):
    doc, _ = bench_doc
    state_bytes = doc["meta"]["data"]["versions"]["v0"]["bytes"]
    assert 3.5 * 2**20 < state_bytes < 6 * 2**20
    for r in doc["results"]:
        m = r["median"]
        assert r["runs"] == 1 and len(r["samples"]) == 1
        assert 0 < m["wall_s"] < 60, r
        assert 0.5 < m["peak_rss_mib"] < 2048, r
        assert m["rchar"] > 0 and m["wchar"] >= 0
        if r["backend"] == "s3":
            assert m["requests"]["total"] > 0, r
        else:
            assert m["requests"] is None
        if r["op"] == "backup_full":  # everything reached the repository, and not grossly more
            assert 0.9 * state_bytes <= m["repo_bytes_added"] <= 2.2 * state_bytes, r
        if r["op"] == "backup_incr_1pct" and r["tool"] in ("blobstate", "limit"):
            assert m["repo_bytes_added"] < 0.5 * state_bytes, r
        if r["op"].startswith("restore") and r["tool"] not in ("limit",):
            assert m["wchar"] > 0


def test_targets_ratios_and_outputs(bench_doc):
    doc, out = bench_doc
    names = [t["target"] for t in doc["targets"]]
    assert any("changelog" in n for n in names) and any("peak RSS" in n for n in names)
    replay = next(t for t in doc["targets"] if t["target"].startswith("restore vs changelog replay"))
    assert "changelog-kafka" in replay["detail"], replay  # the Kafka replay, when measured, is the one compared
    kafka = next(r for r in doc["results"] if r["tool"] == "changelog-kafka")
    assert kafka["samples"][0]["extra"]["topic_records"] == doc["meta"]["keys"]
    for t in doc["targets"]:
        assert t["measured"] is not None and (t["ok"] in (True, False) or t.get("reported")), t
    assert doc["ratios"]["file"]["restore_empty"]["x_limit"]["limit"] == 1.0
    assert doc["meta"]["cache"] == "warm"
    md = (out / "latest.md").read_text()
    assert "| restore into an empty dir | blobstate |" in md and "### s3://" in md
    # issue 31: every peer ratio in one table, the Spark per-batch rows (in-process delta commits) with it
    rows = {(r["backend"], r["label"]) for r in doc["peer_ratios"]}
    assert ("s3", "incremental backup, 1% changed") in rows and ("file", "restore into the previous version") in rows
    assert ("file", "restore into the previous version, --verify-kept identity") in rows
    assert all(r["ratio"]["rclone"] > 0 for r in doc["peer_ratios"])
    for backend in ("file", "s3"):
        deltas = doc["delta_commits"][backend]
        assert deltas["commits"] == 5 and 0 < deltas["p50Ms"] <= deltas["p99Ms"]
    assert doc["delta_commits"]["s3"]["requestsPerCommit"]["total"] > 0
    assert "### Every peer ratio" in md and "Spark per batch: delta commit" in md
    png = (out / "latest.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_transports_side_by_side_smoke(tmp_path):
    """``bench/transports.py`` on the three real emulators with 2 small files: every client that can reach an
    emulator moves the bytes there and back intact; the table names every row."""
    if shutil.which("rclone") is None or shutil.which("/usr/bin/time") is None:
        pytest.skip("rclone or GNU time missing (run .ci/install-bench.sh)")
    pytest.importorskip("obstore")
    proc = subprocess.run([sys.executable, "-m", "bench.transports", "--size", "2MiB", "--files", "2", "--out",
                           str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=this_interpreters_path())
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "transports.json").read_text())
    rows = {(r["backend"], r["client"]): r for r in doc["rows"]}
    assert set(rows) == {(b, c) for b in ("s3", "azure", "gcs")
                         for c in ("fsspec", "obstore", "rclone", "blobstate", "blobstate-cli")}
    assert rows[("gcs", "obstore")].get("skipped")  # obstore's GCS store cannot be pointed at an emulator
    for key in [("s3", c) for c in ("fsspec", "obstore", "rclone", "blobstate", "blobstate-cli")] + \
               [("azure", c) for c in ("fsspec", "obstore", "rclone", "blobstate", "blobstate-cli")] + \
               [("gcs", c) for c in ("fsspec", "blobstate", "blobstate-cli")]:
        row = rows[key]
        assert row["up"]["wall_s"] > 0 and row["down"]["wall_s"] > 0, row
        assert row["verified"] == 2, row
    assert "| azure | rclone |" in (tmp_path / "transports.md").read_text()
