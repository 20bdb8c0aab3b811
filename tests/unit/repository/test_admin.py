"""``blobstate.repository.admin``: ``init`` writes the marker once (idempotent with the same log, refused for a
location holding other objects or for ``encrypt`` without a key), ``rotate_key`` re-wraps an encrypted repository's
key through the verb's own settings, and a local store has no lifecycle rule (leases, swept by gc)."""

from __future__ import annotations

import pytest

from blobstate.codec.keys import KeyConfig
from blobstate.config.settings import Settings
from blobstate.errors import EncryptionKeyError, LogMismatchError, RepositoryNotFound
from blobstate.repository.admin import init, lifecycle_rule, rotate_key
from blobstate.repository.repo import Repository


def _key(tmp_path, name: str, material: bytes) -> str:  # noqa: ANN001
    path = tmp_path / name
    path.write_bytes(material)
    path.chmod(0o600)
    return str(path)


def test_init_is_idempotent_with_the_same_log_and_refuses_another(tmp_path):
    url = f"file://{tmp_path}/repo"
    first = init(repo=url, settings=Settings())
    assert init(repo=url, settings=Settings()).repository_id == first.repository_id and first.encryption is None
    with pytest.raises(LogMismatchError):
        init(repo=url, log=f"file://{tmp_path}/elsewhere", settings=Settings())
    moved = init(repo=url, log=f"file://{tmp_path}/elsewhere", change_log=True, settings=Settings())
    assert moved.repository_id == first.repository_id


def test_init_refuses_a_location_holding_other_objects(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "someone-elses.txt").write_text("not blobstate's")
    with pytest.raises(RepositoryNotFound):
        init(repo=f"file://{tmp_path}/busy", settings=Settings())
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["someone-elses.txt"]


def test_encrypt_without_a_key_writes_nothing(tmp_path):
    with pytest.raises(EncryptionKeyError, match="needs a key"):
        init(repo=f"file://{tmp_path}/repo", encrypt=True, settings=Settings())
    assert not (tmp_path / "repo").exists()


def test_a_key_makes_an_encrypted_repository_whose_key_rotate_key_rewraps(tmp_path):
    url = f"file://{tmp_path}/repo"
    old, new = _key(tmp_path, "old.key", b"o" * 32), _key(tmp_path, "new.key", b"n" * 32)
    created = init(repo=url, key_file=old, settings=Settings())
    assert created.encryption is not None
    rotated = rotate_key(repo=url, key_file=old, new_key_file=new, settings=Settings())
    assert rotated.repository_id == created.repository_id and rotated.encryption != created.encryption
    Repository.open(url, create=False, key_config=KeyConfig(key_file=new), settings=Settings()).close()
    with pytest.raises(EncryptionKeyError):
        rotate_key(repo=url, key_file=old, new_key_file=new, settings=Settings())  # the old key opens it no more


def test_a_local_store_has_no_lifecycle_rule(tmp_path):
    assert lifecycle_rule(repo=f"file://{tmp_path}/repo", settings=Settings()) == (None, False)
