"""``blobstate.plugins.key_file``: the ``file`` key provider on real key files. Raw or text key material (the
editor's whitespace ignored), 32 to 4096 bytes; a missing, short or long file is refused naming its path and never
its content; the key id is derived one way and tells a wrong file at once; the data key round-trips bound to its
repository; a file others can read is warned about once; the material is registered as a secret."""

from __future__ import annotations

import logging
import os

import pytest

from blobstate.config.options import environment_secrets
from blobstate.errors import ConfigurationError, EncryptionKeyError
from blobstate.plugins import key_file as kf
from blobstate.plugins.key_file import FileKeyProvider, read_key_file

RAW = bytes(range(100, 132))
HEX = "3f" * 32


def make(tmp_path, data: bytes, name: str = "k.key", mode: int = 0o600) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    path.chmod(mode)
    return str(path)


def provider(path: str) -> FileKeyProvider:
    return FileKeyProvider(None, {"key_file": path})


@pytest.mark.parametrize("data, material", [
    (RAW, RAW), (HEX.encode(), HEX.encode()), (f"  {HEX}\r\n\n".encode(), HEX.encode()),
    (b"\n" + RAW[:31] + b"\x00", b"\n" + RAW[:31] + b"\x00"),  # binary: kept as it is, whitespace included
    (b"\n" + bytes(range(14, 46)) + b"\n", b"\n" + bytes(range(14, 46)) + b"\n"),  # ASCII, not text: kept too
    (b"a" * 4096, b"a" * 4096), (b"correct horse battery staple, long enough!",
                                 b"correct horse battery staple, long enough!"),
], ids=["raw", "hex", "hex with whitespace", "binary", "ascii controls", "the longest", "a passphrase"])
def test_key_material_is_raw_bytes_or_stripped_text(tmp_path, data, material):
    assert read_key_file(make(tmp_path, data)) == material


@pytest.mark.parametrize("data, held", [(b"", 0), (b"s" * 31, 31), (b"  " + b"s" * 31 + b"\n", 31),
                                        (b"s" * 4097, 4097)])
def test_too_little_or_too_much_material_names_the_path_and_never_the_content(tmp_path, data, held):
    path = make(tmp_path, data)
    with pytest.raises(ConfigurationError, match=rf"the key file {path} holds {held} bytes of key material: a key "
                                                 r"file holds 32 to 4096") as info:
        read_key_file(path)
    assert "sss" not in str(info.value)


@pytest.mark.parametrize("make_path", [lambda t: str(t / "missing.key"), lambda t: str(t)],
                         ids=["missing", "a directory"])
def test_an_unreadable_key_file_is_an_encryption_key_error_naming_it(tmp_path, make_path):
    path = make_path(tmp_path)
    with pytest.raises(EncryptionKeyError, match=f"cannot read the key file {path}: ") as info:
        read_key_file(path)
    assert info.value.exit_code == 3


def test_no_key_file_given_is_an_encryption_key_error():
    for options in (None, {}, {"key_file": ""}):
        with pytest.raises(EncryptionKeyError, match="no key file was given"):
            FileKeyProvider(None, options)


def test_the_key_id_is_derived_one_way_and_ignores_the_editors_whitespace(tmp_path):
    a = provider(make(tmp_path, HEX.encode(), "a.key"))
    b = provider(make(tmp_path, f"{HEX}\n".encode(), "b.key"))
    c = provider(make(tmp_path, RAW, "c.key"))
    assert a.key_id() == b.key_id() != c.key_id()
    assert a.key_id().startswith("file:") and len(a.key_id()) == 5 + 16 and int(a.key_id()[5:], 16) >= 0
    assert HEX[:16] not in a.key_id() and RAW.hex()[:16] not in c.key_id()
    assert a.name == "file" and a.path == os.path.abspath(str(tmp_path / "a.key"))


def test_a_data_key_round_trips_bound_to_its_repository(tmp_path):
    keys = provider(make(tmp_path, RAW))
    data_key = os.urandom(32)
    wrapped = keys.wrap(data_key, b"repo-1")
    assert data_key not in wrapped and len(wrapped) == 12 + 32 + 16
    assert keys.unwrap(wrapped, keys.key_id(), b"repo-1") == data_key
    assert provider(make(tmp_path, RAW, "copy.key")).unwrap(wrapped, keys.key_id(), b"repo-1") == data_key
    with pytest.raises(EncryptionKeyError, match="cannot unwrap the repository's data key"):
        keys.unwrap(wrapped, keys.key_id(), b"repo-2")
    damaged = bytearray(wrapped)
    damaged[20] ^= 1
    with pytest.raises(EncryptionKeyError, match=r"\(key file:[0-9a-f]{16}\) cannot unwrap"):
        keys.unwrap(bytes(damaged), keys.key_id(), b"repo-1")


def test_a_wrong_key_file_is_told_by_its_key_id_before_any_decryption(tmp_path):
    right, wrong = provider(make(tmp_path, RAW, "right.key")), provider(make(tmp_path, HEX.encode(), "wrong.key"))
    wrapped = right.wrap(os.urandom(32), b"r")
    with pytest.raises(EncryptionKeyError, match=rf"holds key {wrong.key_id()}, and the repository's data key is "
                                                 rf"wrapped by key {right.key_id()}: wrong key file"):
        wrong.unwrap(wrapped, right.key_id(), b"r")


def test_a_key_file_others_can_read_is_warned_about_once(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(kf, "_WARNED", set())
    open_file = make(tmp_path, RAW, "open.key", mode=0o644)
    private = make(tmp_path, RAW, "private.key", mode=0o600)
    with caplog.at_level(logging.WARNING, logger="blobstate.plugins.key_file"):
        provider(open_file)
        provider(open_file)
        provider(private)
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [f"the key file {open_file} can be read by other users (chmod 600 it)"]


def test_the_material_and_the_derived_key_are_registered_as_secrets(tmp_path):
    material = os.urandom(32)
    provider(make(tmp_path, material))
    assert material.hex() in environment_secrets({})


def test_a_home_relative_path_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    make(tmp_path, RAW)
    assert provider("~/k.key").path == str(tmp_path / "k.key")
