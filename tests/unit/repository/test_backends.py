"""``blobstate.repository.backends``: URLs normalised (a plain path becomes an absolute ``file://`` URL), the scheme
a backend is selected by, and the built-in backends opened for local files: a blob store, the file log sharing the
repository's store, a local store by type and a directory's store type detected."""

from __future__ import annotations

import os

import pytest

from blobstate.errors import ConfigurationError
from blobstate.plugin.interfaces import BlobStore, CheckpointLog, LocalStore, PutRequest
from blobstate.repository.backends import (
    detect_store_type,
    normalize_url,
    open_blob_store,
    open_checkpoint_log,
    open_local_store,
    open_repository_log,
    url_scheme,
)


def test_a_plain_path_becomes_an_absolute_file_url_and_a_url_stays_as_it_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalize_url("repo") == f"file://{tmp_path}/repo"
    assert normalize_url("~/x") == "file://" + os.path.expanduser("~/x")
    for url in ("s3://bucket/p", "file:///abs", "data:text/plain,x", "kafka://broker:9092/topic"):
        assert normalize_url(url) == url
    assert normalize_url("c://x").startswith("file://")  # a one-letter scheme is a path (a drive), not a URL
    with pytest.raises(ConfigurationError, match="empty URL"):
        normalize_url("")


@pytest.mark.parametrize(("url", "scheme"), [("s3://b/p", "s3"), ("file:///x", "file"), ("/plain/path", "file"),
                                             ("postgresql+psycopg://h/db", "postgresql"), ("GS://b", "gs")])
def test_the_scheme_a_backend_is_selected_by(url, scheme):
    assert url_scheme(url) == scheme


def test_an_unknown_scheme_is_a_configuration_error():  # fsspec, the catch-all, knows no such protocol either
    with pytest.raises(ConfigurationError, match="nosuchscheme"):
        open_blob_store("nosuchscheme://x/y")


@pytest.mark.parametrize("kind", ["checkpoint log", "blob store"])
def test_a_plugin_scheme_no_plugin_registered_is_a_typed_error_never_the_catch_all(tmp_path, kind):
    # ``delayed+file://``: the ``delayed`` plugin's URL over a file URL; without that plugin, neither the file log
    # nor the fsspec store (both serve any scheme, ``*``) may take it
    url = f"delayed+{(tmp_path / 'repo').as_uri()}"
    opener = open_checkpoint_log if kind == "checkpoint log" else open_blob_store
    with pytest.raises(ConfigurationError, match=f"no {kind} for 'delayed'.*blobstate plugins"):
        opener(url)
    assert not (tmp_path / "repo").exists()


def test_a_file_blob_store_writes_under_its_root(tmp_path):
    store = open_blob_store(str(tmp_path / "repo"))
    try:
        assert isinstance(store, BlobStore)
        store.put(PutRequest("a/b", b"data"))
        assert store.get_bytes("a/b") == b"data" and (tmp_path / "repo" / "a" / "b").read_bytes() == b"data"
    finally:
        store.close()


def test_the_repositorys_own_log_shares_its_store_and_another_log_opens_its_own(tmp_path):
    url = normalize_url(str(tmp_path / "repo"))
    store = open_blob_store(url)
    try:
        from blobstate.config.settings import Settings

        own = open_repository_log(url, None, store, None, None, Settings())
        same = open_repository_log(url, str(tmp_path / "repo"), store, None, None, Settings())
        other = open_repository_log(url, str(tmp_path / "logs"), store, None, None, Settings())
        assert all(isinstance(log, CheckpointLog) for log in (own, same, other))
        assert own.url == same.url == url and other.url == normalize_url(str(tmp_path / "logs"))
        assert isinstance(open_checkpoint_log(url, blob_store=store), CheckpointLog)
    finally:
        store.close()


def test_local_stores_by_type_and_a_directorys_type_detected(tmp_path):
    assert isinstance(open_local_store("dir"), LocalStore)
    with pytest.raises(ConfigurationError, match="no local store for 'nosuchtype'"):
        open_local_store("nosuchtype")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert detect_store_type(str(plain)) == "dir"
    (plain / "CURRENT").write_text("MANIFEST-000001\n")
    assert detect_store_type(str(plain)) == "rocksdb"  # the higher priority that says yes
    with pytest.raises(ConfigurationError, match="cannot tell the store type"):
        detect_store_type(str(tmp_path / "missing"))
