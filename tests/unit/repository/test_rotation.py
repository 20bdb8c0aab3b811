"""``blobstate.repository.rotation`` on a real encrypted ``file://`` repository: the data key re-wrapped under the new
key (the new key opens the repository, the old one no longer does, the same data still reads), no kept copy left
behind, and each refusal (no new key, not encrypted, no repository, a wrong old key, another rotation first)
changes nothing."""

from __future__ import annotations

import pytest

from blobstate.codec.keys import KeyConfig
from blobstate.errors import ConfigurationError, EncryptionKeyError, ObjectChangedError, RepositoryNotFound
from blobstate.model import layout
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.backends import open_blob_store
from blobstate.repository.marker import keep_copy, read_marker
from blobstate.repository.repo import Repository
from blobstate.repository.rotation import drop_copies, record_encryption, rotate_data_key


def _key(tmp_path, name: str, material: bytes) -> KeyConfig:  # noqa: ANN001
    path = tmp_path / name
    path.write_bytes(material)
    path.chmod(0o600)
    return KeyConfig(key_file=str(path))


@pytest.fixture
def keys(tmp_path):
    return _key(tmp_path, "old.key", bytes(range(32))), _key(tmp_path, "new.key", b"n" * 32)


@pytest.fixture
def url(tmp_path, keys):
    url = f"file://{tmp_path}/repo"
    repo = Repository.open(url, create=True, key_config=keys[0])
    repo.store.put(PutRequest("job/0/s/blobs/" + "a" * 32, b"plaintext the repository encrypts"))
    repo.close()
    return url


@pytest.fixture
def store(url):
    raw = open_blob_store(url)
    yield raw
    raw.close()


def test_the_new_key_opens_the_repository_and_the_old_one_no_longer_does(url, store, keys):
    old, new = keys
    before = read_marker(store)
    after = rotate_data_key(store, url, old, new)
    assert after.repository_id == before.repository_id and after.encryption != before.encryption
    assert list(store.list(layout.MARKER_COPIES)) == []  # the kept copy went once the new key opened the marker
    with pytest.raises(EncryptionKeyError):
        Repository.open(url, create=False, key_config=old)
    repo = Repository.open(url, create=False, key_config=new)
    try:
        assert repo.store.get_bytes("job/0/s/blobs/" + "a" * 32) == b"plaintext the repository encrypts"
    finally:
        repo.close()
    again = rotate_data_key(store, url, new, new)  # running it again to the same key finishes an interrupted one
    assert again.encryption["keyId"] == after.encryption["keyId"] and list(store.list(layout.MARKER_COPIES)) == []
    Repository.open(url, create=False, key_config=new).close()


def test_a_wrong_old_key_changes_nothing(url, store, keys, tmp_path):
    before = read_marker(store)
    with pytest.raises(EncryptionKeyError):
        rotate_data_key(store, url, _key(tmp_path, "wrong.key", b"w" * 32), keys[1])
    assert read_marker(store) == before and list(store.list(layout.MARKER_COPIES)) == []


def test_refusals_before_anything_is_read(url, store, keys, tmp_path):
    with pytest.raises(ConfigurationError, match="name the new key"):
        rotate_data_key(store, url, keys[0], KeyConfig())
    empty = open_blob_store(f"file://{tmp_path}/empty")
    with pytest.raises(RepositoryNotFound):
        rotate_data_key(empty, f"file://{tmp_path}/empty", *keys)
    Repository.open(f"file://{tmp_path}/plain", create=True).close()
    plain = open_blob_store(f"file://{tmp_path}/plain")
    with pytest.raises(ConfigurationError, match="is not encrypted"):
        rotate_data_key(plain, f"file://{tmp_path}/plain", *keys)
    empty.close()
    plain.close()


def test_a_rotation_overtaken_by_another_changes_nothing_of_the_others(store):
    read = read_marker(store)
    theirs = dict(read.encryption, keyId="their-key")
    record_encryption(store, read, theirs)
    with pytest.raises(ObjectChangedError, match="changed by another key rotation"):
        record_encryption(store, read, dict(read.encryption, keyId="our-key"))
    assert read_marker(store).encryption == theirs
    assert record_encryption(store, read, theirs).encryption == theirs  # an earlier attempt of ours: written


def test_drop_copies_removes_every_kept_copy(store):
    info = read_marker(store)
    kept = keep_copy(store, info)
    assert [i.blob_id for i in store.list(layout.MARKER_COPIES)] == [kept]
    assert drop_copies(store) == [kept] and list(store.list(layout.MARKER_COPIES)) == []
