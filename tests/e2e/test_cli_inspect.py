"""Looking into a repository from the CLI: `list` (time, host, batch id, files, data size), `ls`, `diff`, `stats`,
`--checkpoint latest|prefix|generation`, repository-wide `verify`, `gc --dry-run` text equal to its JSON, human
units accepted and printed."""

from __future__ import annotations

import os
import re
import socket

import pytest

from blobstate.config.units import format_duration, format_size, iso_time, parse_duration_ms, parse_size


def write(path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(data)


@pytest.fixture
def history(cli, tmp_path):
    """A repository with three checkpoints of `counts` (batch ids 7, 8, 9) and one of `other`."""
    repo = tmp_path / "repo"
    counts = tmp_path / "counts"
    write(counts, {"a.txt": b"a" * 1000, "sub/b.bin": os.urandom(3000)})
    ids = []
    for batch, change in ((7, None), (8, {"c.txt": b"c" * 500}), (9, {"a.txt": b"A" * 1200})):
        if change:
            write(counts, change)
        if batch == 9:
            (counts / "sub" / "b.bin").unlink()
        result = cli("backup", counts, "--repo", repo, "--batch-id", str(batch), "-q")
        assert result.returncode == 0, result.stderr
        ids.append(result.stdout.strip())
    other = tmp_path / "other"
    write(other, {"x": b"x" * 10})
    assert cli("backup", other, "--repo", repo, "--job", "j2", "-q").returncode == 0
    return repo, ids


def test_list_shows_time_host_batch_files_and_size(cli, history):
    repo, ids = history
    rows = cli("list", "--repo", repo, "--json").json()
    counts = [r for r in rows if r["store"] == "default/0/counts"]
    assert [r["checkpointId"] for r in counts] == ids
    assert [r["batchId"] for r in counts] == [7, 8, 9]
    assert [(r["filesTotal"], r["bytesTotal"]) for r in counts] == [(2, 4000), (3, 4500), (2, 1700)]
    assert {r["host"] for r in rows} == {socket.gethostname()}
    for r in rows:
        assert r["createdTime"] == iso_time(r["createdTimeMs"]) and r["createdTime"].endswith("Z")
    text = cli("list", "--repo", repo).stdout
    line = next(x for x in text.splitlines() if ids[1] in x)
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line) and " 8 " in line and "4.4 KiB" in line
    only = cli("list", "--repo", repo, "--job", "j2", "--json").json()
    assert [r["store"] for r in only] == ["j2/0/other"]


@pytest.mark.parametrize("spec, expected", [("latest", 2), ("1", 0), ("2", 1), ("3", 2), ("PREFIX", 1),
                                            ("FULL", 0)])
def test_checkpoint_takes_latest_a_prefix_or_a_generation(cli, history, tmp_path, spec, expected):
    repo, ids = history
    if spec == "PREFIX":
        spec = ids[1][: next(n for n in range(14, 23) if sum(i.startswith(ids[1][:n]) for i in ids) == 1)]
    elif spec == "FULL":
        spec = ids[0]
    restored = cli("restore", tmp_path / "out", "--repo", repo, "--store", "counts", "--checkpoint", spec)
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.strip() == ids[expected]
    listed = cli("ls", "--repo", repo, "--store", "counts", "--checkpoint", spec, "--json").json()
    assert listed["checkpointId"] == ids[expected]


def test_an_ambiguous_or_unknown_checkpoint_is_a_clear_error(cli, history):
    repo, ids = history
    common = os.path.commonprefix(ids)
    ambiguous = cli("verify", "--repo", repo, "--store", "counts", "--checkpoint", common)
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr and ids[0] in ambiguous.stderr
    missing = cli("verify", "--repo", repo, "--store", "counts", "--checkpoint", "99")
    assert missing.returncode == 5 and "no checkpoint '99'" in missing.stderr


def test_ls_lists_the_files_of_a_snapshot(cli, history):
    repo, ids = history
    listing = cli("ls", "--repo", repo, "--store", "counts", "--checkpoint", "2", "--json").json()
    assert [(f["path"], f["sizeInBytes"]) for f in listing["files"]] == [("a.txt", 1000), ("c.txt", 500),
                                                                         ("sub/b.bin", 3000)]
    text = cli("ls", "sub/", "--repo", repo, "--store", "counts", "--checkpoint", "2")
    assert text.returncode == 0 and text.stdout.split()[-1] == "sub/b.bin" and len(text.stdout.splitlines()) == 1


def test_diff_between_two_checkpoints(cli, history):
    repo, ids = history
    result = cli("diff", "1", "--repo", repo, "--store", "counts", "--json").json()
    assert (result["from"]["checkpointId"], result["to"]["checkpointId"]) == (ids[0], ids[2])
    assert [a["path"] for a in result["added"]] == ["c.txt"]
    assert [r["path"] for r in result["removed"]] == ["sub/b.bin"]
    assert [(c["path"], c["sizeBefore"], c["sizeAfter"]) for c in result["changed"]] == [("a.txt", 1000, 1200)]
    text = cli("diff", ids[0], "2", "--repo", repo, "--store", "counts").stdout
    assert "+ c.txt" in text and "0 removed" in text and "1 added" in text


@pytest.fixture
def uncompressed(monkeypatch):
    """Stored bytes equal to the files' own (stats count stored bytes, which compression would shrink)."""
    monkeypatch.setenv("BLOBSTATE_COMPRESSION", "off")


def test_stats_per_store(cli, uncompressed, history):
    repo, _ = history
    stats = {s["store"]: s for s in cli("stats", "--repo", repo, "--json").json()}
    counts = stats["default/0/counts"]
    assert counts["checkpoints"] == 3 and counts["latest"]["filesTotal"] == 2
    assert counts["logicalBytes"] == 4000 + 4500 + 1700
    # Unique data: a.txt twice (1000 + 1200), b.bin once, c.txt once: incremental backups stored each once.
    assert counts["referencedBytes"] == 1000 + 1200 + 3000 + 500
    assert counts["dedupRatio"] == round(10200 / 5700, 3)
    assert stats["j2/0/other"]["checkpoints"] == 1
    text = cli("stats", "--repo", repo).stdout
    assert "default/0/counts" in text and "1.79x" in text


def test_verify_covers_every_store_and_names_the_damaged_one(cli, history):
    repo, _ = history
    ok = cli("verify", "--repo", repo, "--json")
    assert ok.returncode == 0, ok.stderr
    assert sorted(r["store"] for r in ok.json()) == ["default/0/counts", "j2/0/other"]
    blob = next((repo / "j2" / "0" / "other" / "blobs").iterdir())
    blob.write_bytes(b"y" * 10)
    bad = cli("verify", "--repo", repo)
    assert bad.returncode == 3
    assert "j2/0/other" in bad.stdout and "1 problem\n" in bad.stdout  # a plural only for more
    assert "default/0/counts" in bad.stdout and ": ok" in bad.stdout


def _text_entries(text: str) -> dict[str, set[str]]:
    entries: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.startswith("  "):
            label, _, value = line.strip().partition(" ")
            entries.setdefault(label, set()).add(value)
    return entries


def test_gc_dry_run_text_lists_what_its_json_lists(cli, history):
    repo, ids = history
    orphan = repo / "default" / "0" / "counts" / "blobs" / ("f" * 32)
    orphan.write_bytes(b"left over")
    now = str(2 * 10**13)  # far in the future: every orphan is older than the TTL
    as_json = cli("gc", "--repo", repo, "--dry-run", "--retain", "1", "--now", now, "--json").json()
    text = cli("gc", "--repo", repo, "--dry-run", "--retain", "1", "--now", now).stdout
    counts = next(r for r in as_json if r["store"] == "default/0/counts")
    assert counts["checkpointsPruned"] == ids[:2] and str(orphan.relative_to(repo)) in counts["orphansDeleted"]
    expected = {label: set(r[field]) for r in as_json
                for field, label in (("expiredDeleted", "expired"), ("orphansDeleted", "orphan"),
                                     ("expiredHealed", "healed"), ("checkpointsPruned", "checkpoint")) if r[field]}
    merged: dict[str, set[str]] = {}
    for label, values in expected.items():
        merged.setdefault(label, set()).update(values)
    entries = _text_entries(text)
    assert {v.split()[0] for v in entries.pop("keep")} == {k["checkpointId"] for r in as_json
                                                          for k in r["checkpointsKept"]}
    assert entries.pop("retention:") == {r["retention"] for r in as_json if r["retention"]}
    assert entries == merged
    assert "would prune 2 checkpoint(s)" in text
    assert orphan.exists() and len(cli("list", "--repo", repo, "--json").json()) == 4  # a dry run


def test_human_units_are_accepted_and_printed(cli, tmp_path):
    store = tmp_path / "big"
    write(store, {"data.bin": os.urandom(300 * 1024)})
    repo = tmp_path / "repo"
    result = cli("backup", store, "--repo", repo, "--ttl", "1d", "--chunk-size", "100KiB", "--json")
    assert result.returncode == 0, result.stderr
    listing = cli("ls", "--repo", repo, "--store", "big", "--json").json()
    assert listing["files"][0]["blobs"] == 3  # 300 KiB in chunks of 100 KiB
    text = cli("backup", store, "--repo", repo, "--ttl", "12h", "--chunk-size", "64MiB")
    assert "300.0 KiB" in text.stderr
    assert cli("gc", "--repo", repo, "--ttl", "90s", "--dry-run").returncode == 0
    bad = cli("backup", store, "--repo", repo, "--chunk-size", "64 parsecs")
    assert bad.returncode == 2 and "not a size" in bad.stderr
    assert cli("backup", store, "--repo", repo, "--ttl", "1 fortnight").returncode == 2


def test_units_round_trip():
    assert parse_size("64MiB") == 64 << 20 and parse_size("64MB") == 64_000_000 and parse_size("4096") == 4096
    assert parse_duration_ms("1d") == 86_400_000 and parse_duration_ms("1h30m") == 5_400_000
    assert parse_duration_ms("500ms") == 500 and parse_duration_ms("86400000") == 86_400_000
    assert format_size(64 << 20) == "64.0 MiB" and format_duration(86_400_000) == "1d"
    assert iso_time(0) == "1970-01-01T00:00:00.000Z"
