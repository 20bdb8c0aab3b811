"""``blobstate.codec.keys``: the data key of an encrypted repository, wrapped by a real key file through the plugin
manager's ``file`` key provider. The marker's ``encryption`` object round-trips and never carries the key; a wrong
key, no key, or a key for a repository that is not encrypted is an ``EncryptionKeyError`` (exit 3) before anything
is written; a damaged object is a ``CorruptIndexError``; rotation re-wraps the same data key."""

from __future__ import annotations

import base64
import json

import pytest

from blobstate.codec.cipher import ALGORITHM
from blobstate.codec.keys import EncryptionInfo, KeyConfig, new_encryption, open_cipher, rewrap
from blobstate.config.options import environment_secrets
from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError, CorruptIndexError, EncryptionKeyError
from blobstate.plugin.hookspecs import hookimpl
from blobstate.plugin.interfaces import KeyProvider
from blobstate.plugin.manager import build_plugin_manager, reset_plugin_manager
from blobstate.plugin.records import KeyProviderSpec

URL = "s3://user:hunter22@bucket/repo"


def key_file(tmp_path, name: str, material: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(material)
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def first(tmp_path):
    return KeyConfig(key_file=key_file(tmp_path, "first.key", bytes(range(32))))


@pytest.fixture
def second(tmp_path):
    return KeyConfig(key_file=key_file(tmp_path, "second.key", b"x" * 64))


def test_the_encryption_object_round_trips_and_its_summary_leaves_out_the_wrapped_key():
    info = EncryptionInfo(ALGORITHM, "file", "file:0123456789abcdef", b"\x00\xffwrapped")
    doc = info.to_json()
    assert doc == {"algorithm": "AES-256-GCM", "keyProvider": "file", "keyId": "file:0123456789abcdef",
                   "wrappedKey": base64.b64encode(b"\x00\xffwrapped").decode()}
    assert EncryptionInfo.from_json(json.loads(json.dumps(doc))) == info
    assert info.summary() == {k: v for k, v in doc.items() if k != "wrappedKey"}


@pytest.mark.parametrize("doc", [
    {"algorithm": ALGORITHM, "keyProvider": "file", "keyId": "k"},
    {"algorithm": ALGORITHM, "keyProvider": "file", "keyId": "k", "wrappedKey": "not base64!"},
    {"algorithm": ALGORITHM, "keyProvider": "file", "keyId": "k", "wrappedKey": "QQ"},  # bad padding
    None, [], "text",
], ids=["no wrapped key", "not base64", "bad padding", "null", "a list", "a string"])
def test_a_damaged_encryption_object_is_a_corrupt_marker(doc):
    with pytest.raises(CorruptIndexError, match="the repository marker's encryption is damaged") as info:
        EncryptionInfo.from_json(doc)
    assert info.value.exit_code == 3


def test_an_algorithm_this_blobstate_does_not_read_is_named_short():
    doc = {"algorithm": "ChaCha20-Poly1305" + "x" * 100, "keyProvider": "f", "keyId": "k", "wrappedKey": "AA=="}
    with pytest.raises(ConfigurationError, match=r"encrypted with 'ChaCha20-Poly1305x{23}', which this blobstate does "
                                                 r"not read \(it reads AES-256-GCM\)$"):
        EncryptionInfo.from_json(doc)


def test_a_configuration_is_given_by_any_of_its_parts_and_required_only_to_encrypt():
    assert not KeyConfig().given
    assert all(KeyConfig(**{f: "x"}).given for f in ("key_file", "provider", "key_id"))
    assert KeyConfig().required(False) == KeyConfig()
    with pytest.raises(EncryptionKeyError, match="--encrypt needs a key"):
        KeyConfig().required(True)


def test_the_configuration_takes_the_settings_under_the_given_values():
    settings = Settings.from_environ({"BLOBSTATE_KEY_FILE": "/from/env.key"})
    assert KeyConfig.of(settings) == KeyConfig("/from/env.key", None, None)
    assert KeyConfig.of(settings, key_file="/given.key", key_id="k1") == KeyConfig("/given.key", None, "k1")
    assert KeyConfig.of(Settings()) == KeyConfig()


def test_a_new_repositorys_data_key_opens_with_its_key_file_and_only_for_its_repository(first):
    block = new_encryption(first)("repo-1")
    info = EncryptionInfo.from_json(block)
    assert (info.algorithm, info.key_provider) == (ALGORITHM, "file") and info.key_id.startswith("file:")
    assert "key_file" not in json.dumps(block) and first.key_file not in json.dumps(block)
    cipher = open_cipher(block, "repo-1", first, url=URL, writing=True)
    sealed = cipher.seal("record", "n", b"body")
    again = open_cipher(block, "repo-1", KeyConfig(key_file=first.key_file), url=URL, writing=False)
    assert again.unseal("record", "n", sealed) == b"body"
    with pytest.raises(EncryptionKeyError, match="cannot unwrap"):
        open_cipher(block, "repo-2", first, url=URL, writing=False)  # the wrapped key is bound to its repository


def test_the_data_key_is_registered_as_a_secret_once_opened(first):
    cipher = open_cipher(new_encryption(first)("repo-1"), "repo-1", first, url=URL, writing=False)
    assert cipher._key.hex() in environment_secrets({})


def test_each_new_repository_gets_its_own_data_key(first):
    a = open_cipher(new_encryption(first)("repo-1"), "repo-1", first, url=URL, writing=False)
    b = open_cipher(new_encryption(first)("repo-1"), "repo-1", first, url=URL, writing=False)
    assert a._key != b._key


def test_a_wrong_key_file_is_refused_naming_both_key_ids(first, second):
    block = new_encryption(first)("repo-1")
    with pytest.raises(EncryptionKeyError, match=r"holds key file:[0-9a-f]{16}.*wrapped by key file:[0-9a-f]{16}: "
                                                 r"wrong key file") as info:
        open_cipher(block, "repo-1", second, url=URL, writing=False)
    assert info.value.exit_code == 3


def test_no_key_for_an_encrypted_repository_names_the_key_and_hides_the_credentials(first):
    block = new_encryption(first)("repo-1")
    with pytest.raises(EncryptionKeyError, match=r"the repository at s3://\*\*\*@bucket/repo is encrypted \(key "
                                                 r"file:[0-9a-f]{16} of provider 'file'\): no key file was given"):
        open_cipher(block, "repo-1", KeyConfig(), url=URL, writing=False)


def test_a_key_for_a_repository_that_is_not_encrypted_is_refused_to_writers_only(first):
    assert open_cipher(None, "repo-1", KeyConfig(), url=URL, writing=True) is None
    assert open_cipher(None, "repo-1", first, url=URL, writing=False) is None
    with pytest.raises(EncryptionKeyError, match=r"s3://\*\*\*@bucket/repo is not encrypted: refusing to write "
                                                 r"plaintext") as info:
        open_cipher(None, "repo-1", first, url=URL, writing=True)
    assert "hunter22" not in str(info.value)


def test_rotation_rewraps_the_same_data_key_under_the_new_key(first, second):
    block = new_encryption(first)("repo-1")
    old = open_cipher(block, "repo-1", first, url=URL, writing=False)
    rotated = rewrap(block, "repo-1", first, second)
    assert rotated.key_id != EncryptionInfo.from_json(block).key_id and rotated.key_provider == "file"
    new = open_cipher(rotated.to_json(), "repo-1", second, url=URL, writing=False)
    assert new.unseal("record", "n", old.seal("record", "n", b"kept")) == b"kept"
    with pytest.raises(EncryptionKeyError, match="wrong key file"):
        open_cipher(rotated.to_json(), "repo-1", first, url=URL, writing=False)


def test_rotation_with_the_wrong_old_key_changes_nothing(first, second):
    block = new_encryption(first)("repo-1")
    with pytest.raises(EncryptionKeyError, match="wrong key file"):
        rewrap(block, "repo-1", second, second)


def test_an_unknown_key_provider_is_an_error_naming_it(first):
    with pytest.raises(ConfigurationError, match="no key provider for 'no-such-kms'; known: file"):
        KeyConfig(provider="no-such-kms").provider_for()


class ForgetfulProvider(KeyProvider):
    """A third party's key provider that wraps and then gives back another key than it wrapped."""

    name = "forgetful"

    def __init__(self, key_id: str | None = None, options: object = None) -> None:
        pass

    def key_id(self) -> str:
        return "forgetful:1"

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        return data_key

    def unwrap(self, wrapped: bytes, key_id: str, context: bytes) -> bytes:
        return bytes(32)


@pytest.fixture
def forgetful():
    mgr = build_plugin_manager(autoload=False)
    spec = KeyProviderSpec(name="forgetful", factory=ForgetfulProvider)
    mgr.register(type("Plugin", (), {"blobstate_key_providers": hookimpl(lambda self: [spec])})(), "forgetful")
    reset_plugin_manager(mgr)
    yield KeyConfig(provider="forgetful")
    reset_plugin_manager()


def test_rotation_to_a_provider_that_does_not_give_the_key_back_is_refused(first, forgetful):
    with pytest.raises(EncryptionKeyError, match="key provider 'forgetful' does not give back the data key it wrapped"):
        rewrap(new_encryption(first)("repo-1"), "repo-1", first, forgetful)
