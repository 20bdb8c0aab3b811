"""``blobstate.plugin.entry_points``: the ``blobstate`` entry points are read from the cache only while the
fingerprint of what decides them holds. Real distributions (``.dist-info`` folders with an ``entry_points.txt``)
under ``tmp_path`` are installed, edited and removed on ``sys.path``; the cache lives in ``BLOBSTATE_CACHE_DIR``."""

from __future__ import annotations

import json
import os
import sys

import pytest

from blobstate.plugin import entry_points as ep
from blobstate.plugin.entry_points import EntryPointInfo


def install(site, name: str, points: dict[str, str]) -> str:
    """A distribution ``name`` 1.0 in ``site`` declaring ``points`` in the ``blobstate`` group."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[blobstate]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))
    return str(info)


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("BLOBSTATE_CACHE_DIR", str(tmp_path / "cache"))
    ep.entry_points.cache_clear()
    yield site
    ep.entry_points.cache_clear()


def test_the_fingerprint_holds_while_nothing_changes_and_moves_with_what_decides_the_entry_points(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    path = [str(site), str(tmp_path / "missing")]
    first = ep.fingerprint(path)
    assert ep.fingerprint(path) == first and len(first) == 64
    info = install(site, "plug", {"a": "plug.mod"})
    installed = ep.fingerprint(path)
    assert installed != first
    points = os.path.join(info, "entry_points.txt")
    st = os.stat(points)
    with open(points, "a") as fh:
        fh.write("b = plug.other\n")  # edited in place
    os.utime(points, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with its mtime put back: its size moved
    assert ep.fingerprint(path) != installed
    assert ep.fingerprint([str(site)]) != ep.fingerprint(path)  # another sys.path
    (site / "other.txt").write_text("not a distribution")
    edited = ep.fingerprint([str(site)])
    os.utime(site, ns=(0, 0))  # the folder's own mtime is part of it
    assert ep.fingerprint([str(site)]) != edited


def test_a_zip_on_the_path_counts_by_its_mtime_and_size(tmp_path):
    archive = tmp_path / "plugins.zip"
    archive.write_bytes(b"PK")
    before = ep.fingerprint([str(archive)])
    archive.write_bytes(b"PK\x03\x04")
    assert ep.fingerprint([str(archive)]) != before


def test_the_cache_lives_in_the_settings_cache_dir_or_the_user_cache_dir(monkeypatch, tmp_path):
    from blobstate.config.settings import Settings

    given = Settings.from_environ({"BLOBSTATE_CACHE_DIR": str(tmp_path)}).cache_dir
    assert ep.cache_path(given) == os.path.join(str(tmp_path), "entry-points.json")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ep.cache_path() == os.path.join(str(tmp_path / "xdg"), "blobstate", "entry-points.json")


def test_the_cache_round_trips_and_is_ignored_when_stale_or_damaged(tmp_path):
    path = str(tmp_path / "cache" / "entry-points.json")
    found = (EntryPointInfo("a", "pkg.mod:attr", "dist-a", "1.0"), EntryPointInfo("é", "m", "", ""))
    ep._write_cache(path, "key-1", found)
    assert ep._read_cache(path, "key-1") == found
    assert ep._read_cache(path, "key-2") is None
    assert os.listdir(tmp_path / "cache") == ["entry-points.json"]  # no temporary file left
    for damage in ("{not json", "[]", json.dumps({"format": 99, "fingerprint": "key-1", "entryPoints": []}),
                   json.dumps({"format": 1, "fingerprint": "key-1", "entryPoints": [{"name": "a"}]})):
        with open(path, "w") as fh:
            fh.write(damage)
        assert ep._read_cache(path, "key-1") is None
    assert ep._read_cache(str(tmp_path / "nothing.json"), "key-1") is None


def test_a_cache_that_cannot_be_written_costs_nothing_but_the_scan(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache's folder should be")
    ep._write_cache(str(blocker / "entry-points.json"), "k", ())
    assert blocker.read_text().startswith("a file") and sorted(os.listdir(tmp_path)) == ["file"]


def test_the_entry_points_are_scanned_once_then_read_from_the_cache(site):
    install(site, "blobstate-plug-one", {"one": "plug_one.plugin"})
    found = ep.entry_points()
    assert EntryPointInfo("one", "plug_one.plugin", "blobstate-plug-one", "1.0") in found
    assert ep.entry_points() is found  # once per process
    cache = ep.cache_path()
    doc = json.loads(open(cache).read())
    assert doc["fingerprint"] == ep.fingerprint() and {"name": "one", "value": "plug_one.plugin",
                                                       "distribution": "blobstate-plug-one",
                                                       "version": "1.0"} in doc["entryPoints"]
    doc["entryPoints"] = [{"name": "from-cache", "value": "x", "distribution": "d", "version": "0"}]
    with open(cache, "w") as fh:
        json.dump(doc, fh)
    ep.entry_points.cache_clear()
    assert ep.entry_points() == (EntryPointInfo("from-cache", "x", "d", "0"),)  # the fingerprint held


def test_installing_a_distribution_is_seen_at_the_next_read(site):
    before = ep.entry_points()
    assert not any(e.name == "two" for e in before)
    install(site, "blobstate-plug-two", {"two": "plug_two.plugin:hooks"})
    ep.entry_points.cache_clear()
    assert EntryPointInfo("two", "plug_two.plugin:hooks", "blobstate-plug-two", "1.0") in ep.entry_points()


def test_the_scan_is_what_importlib_metadata_says(site):
    install(site, "blobstate-plug-three", {"three": "plug_three"})
    from importlib import metadata

    expected = {(e.name, e.value) for e in metadata.entry_points(group="blobstate")}
    assert {(e.name, e.value) for e in ep.scan()} == expected and ("three", "plug_three") in expected
    assert sys.path[0] == str(site)
