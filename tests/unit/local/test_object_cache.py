"""``blobstate.local.object_cache``: an entry is served only when its check accepts its bytes, written whole, kept
apart per repository, and off when the setting says so."""

from __future__ import annotations

import os

from blobstate.local import workdir
from blobstate.local.object_cache import ObjectCache


def test_an_entry_is_served_only_when_its_check_accepts_the_bytes(tmp_path):
    cache = ObjectCache(str(tmp_path / "c"))
    assert cache.get("j/0/s/indexes/a.json", lambda d: True) is None  # nothing kept yet
    cache.put("j/0/s/indexes/a.json", b"index bytes")
    assert cache.get("j/0/s/indexes/a.json", lambda d: d == b"index bytes") == b"index bytes"
    assert cache.get("j/0/s/indexes/a.json", lambda d: d == b"what the record says") is None  # a mismatch: a miss
    assert (cache.hits, cache.misses) == (1, 2)
    cache.put("j/0/s/indexes/a.json", b"read again")  # a miss read from the store replaces the entry
    assert cache.get("j/0/s/indexes/a.json", lambda d: True) == b"read again"
    leftovers = [n for _, _, names in os.walk(tmp_path) for n in names if ".tmp-" in n]
    assert leftovers == []  # written whole: no temp file stays beside an entry


def test_each_repository_has_its_own_directory_under_the_work_base(tmp_path):
    one = ObjectCache.for_repository(workdir.host_key("a" * 32, "s3://bucket/repo"), str(tmp_path))
    two = ObjectCache.for_repository(workdir.host_key("b" * 32, "s3://bucket/repo"), str(tmp_path))
    assert one is not None and two is not None
    assert one.directory == str(tmp_path / "cache" / ("a" * 32))  # one URL, two repositories: two caches
    assert two.directory != one.directory
    one.put("checkpoints/j/0/s/00000000000000000001.json", b"record")
    assert two.get("checkpoints/j/0/s/00000000000000000001.json", lambda d: True) is None


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_bytes(b"")  # a file where the cache's directory would go
    cache = ObjectCache(str(blocked))
    cache.put("x", b"data")  # logged, not raised
    assert cache.get("x", lambda d: True) is None


def test_discard_and_retain_only_remove_exactly_the_entries_they_name_or_leave_out(tmp_path):
    cache = ObjectCache(str(tmp_path / "c"))
    for name in ("a", "b", "c", "d"):
        cache.put(name, name.encode())
    cache.discard(["a", "never-kept"])  # a name without an entry is no error
    assert cache.get("a", lambda d: True) is None and cache.get("b", lambda d: True) == b"b"
    stray = tmp_path / "c" / "00" / "a-temp-file-a-killed-write-left"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"")
    assert cache.retain_only(["b", "d", "not-cached"]) == 2  # "c" and the stray file
    assert [n for n in "abcd" if cache.get(n, lambda d: True) is not None] == ["b", "d"]
    assert ObjectCache(str(tmp_path / "none")).retain_only([]) == 0  # no directory yet: nothing to do


def test_a_writer_uses_the_base_its_work_directory_lies_in_else_its_work_directory(tmp_path):
    from blobstate.model.records import StoreKey

    key, repository = StoreKey("j", "0", "s"), "c" * 32
    own = ObjectCache.for_writer(repository, key, workdir.store_work_dir(repository, key, str(tmp_path / "base")))
    elsewhere = ObjectCache.for_writer(repository, key, str(tmp_path / "somewhere" / "wd"))
    assert own is not None and elsewhere is not None
    assert own.directory == str(tmp_path / "base" / "cache" / repository)
    assert elsewhere.directory == str(tmp_path / "somewhere" / "wd" / workdir.OBJECT_CACHE)  # never the default base
