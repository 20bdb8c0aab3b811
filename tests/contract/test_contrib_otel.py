"""The OpenTelemetry metrics plugin as a third party installs it: pip-install contrib/blobstate-otel, see it in
`blobstate plugins`, run its own tests (the SDK's InMemoryMetricReader on real commits), and scrape the Prometheus
example's /metrics after real backups."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from cloud_servers import free_port
from dists import install_editable
from fixtures_core import cli_env

ROOT = Path(__file__).resolve().parents[2]
CONTRIB = ROOT / "contrib" / "blobstate-otel"


@pytest.fixture(scope="session")
def otel_dist() -> Path:
    return install_editable(CONTRIB, "blobstate-otel", "blobstate_otel")


def test_listed_by_blobstate_plugins(otel_dist, cli):
    listed = cli("plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    ours = {p["name"]: p for p in listed.json()["plugins"]}["blobstate_otel"]
    assert (ours["distribution"], ours["version"], ours["status"], ours["backends"]) == (
        "blobstate-otel", "0.1.0", "ok", [])
    assert "(observer hooks only)" in cli("plugins").stdout


def test_contrib_own_test_suite_passes(otel_dist, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                           str(otel_dist), str(otel_dist / "tests")], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "BLOBSTATE_WORK_DIR": str(tmp_path / "work")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout


def scrape(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode()
    except OSError:
        return ""


def test_the_prometheus_example_serves_commit_metrics(otel_dist, tmp_path, work_base):
    store = tmp_path / "counts"
    store.mkdir()
    (store / "a.bin").write_bytes(os.urandom(4096))
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(otel_dist / "examples" / "prometheus_exporter.py"), str(store),
                             "--repo", str(tmp_path / "repo"), "--port", str(port), "--every", "0.2",
                             "--backups", "2"], env=cli_env(work_base), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        text = ""
        committed = re.compile(r'blobstate_commits_total\{blobstate_outcome="committed",'
                               r'blobstate_store_key="default/0/counts"[^}]*\} 2\.0')
        completed = re.compile(r'blobstate_commit_duration_seconds_count\{[^}]*outcome="committed"[^}]*\} 2\.0')
        while not (committed.search(text) and completed.search(text)):  # counted at the commit point, timed later
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, text
            time.sleep(0.1)  # polling the exporter until both commits are in
            text = scrape(f"http://127.0.0.1:{port}/metrics")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    uploaded = re.search(r'blobstate_commit_uploaded_bytes_total\{blobstate_store_key="default/0/counts"[^}]*\} (\S+)',
                         text)
    assert uploaded and float(uploaded.group(1)) == 4096.0
    last = re.search(r'blobstate_last_successful_commit_time_seconds\{blobstate_store_key="default/0/counts"[^}]*\} '
                     r'(\S+)', text)
    assert last and abs(float(last.group(1)) - time.time()) < 120
    assert re.search(r'blobstate_commit_duration_seconds_count\{[^}]*outcome="committed"[^}]*\} 2\.0', text), text
