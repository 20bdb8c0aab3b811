"""``blobstate.codec.cipher``: AES-256-GCM bound to the repository, the kind of body and the object's name. A body
round-trips (one shot and streamed); a flipped byte, a cut, another name, kind, repository or key is a
``ChecksumMismatch`` naming the object; nonces are fresh; the key never shows in a ``repr``; without
``cryptography`` the error says how to install it. (``test_frame.py`` covers the stored frame of whole objects.)"""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstate.codec import cipher as c
from blobstate.codec.cipher import ObjectCipher, new_key
from blobstate.errors import ChecksumMismatch, MissingDependencyError

KEY = bytes(range(32))
OBJ = ObjectCipher(KEY, "repo-1")


def test_a_new_key_is_32_fresh_bytes():
    keys = {new_key() for _ in range(16)}
    assert len(keys) == 16 and all(len(k) == c.KEY_BYTES == 32 for k in keys)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=4096), name=st.text(max_size=60), kind=st.sampled_from(["record", "lease", "object"]))
def test_a_sealed_body_opens_under_its_kind_and_name_only(data, name, kind):
    sealed = OBJ.seal(kind, name, data)
    assert len(sealed) == c.NONCE_BYTES + len(data) + c.TAG_BYTES
    assert OBJ.unseal(kind, name, sealed) == data
    with pytest.raises(ChecksumMismatch):
        OBJ.unseal(kind, name + "x", sealed)
    with pytest.raises(ChecksumMismatch):
        OBJ.unseal("other", name, sealed)


def test_every_seal_takes_a_fresh_nonce():
    sealed = [OBJ.seal("record", "n", b"same body") for _ in range(50)]
    assert len({s[:c.NONCE_BYTES] for s in sealed}) == 50 and len(set(sealed)) == 50


@pytest.mark.parametrize("at", [0, c.NONCE_BYTES, -1], ids=["nonce", "ciphertext", "tag"])
def test_a_flipped_byte_anywhere_does_not_authenticate(at):
    sealed = bytearray(OBJ.seal("record", "job/0/s@1/cp", b"a record body"))
    sealed[at] ^= 0x01
    with pytest.raises(ChecksumMismatch, match=r"^the record job/0/s@1/cp does not authenticate under the "
                                               r"repository's data key"):
        OBJ.unseal("record", "job/0/s@1/cp", bytes(sealed))


@pytest.mark.parametrize("size", [0, 1, c.NONCE_BYTES + c.TAG_BYTES - 1])
def test_a_body_too_short_to_be_encrypted_says_so(size):
    with pytest.raises(ChecksumMismatch, match=rf"the lease L is too short to be an encrypted body \({size} bytes\)"):
        OBJ.unseal("lease", "L", b"\x00" * size)


def test_the_shortest_body_is_nonce_and_tag():
    assert OBJ.unseal("lease", "L", OBJ.seal("lease", "L", b"")) == b""


@pytest.mark.parametrize("other", [ObjectCipher(KEY, "repo-2"), ObjectCipher(bytes(32), "repo-1")],
                         ids=["another repository", "another key"])
def test_another_repository_or_key_does_not_open_it(other):
    with pytest.raises(ChecksumMismatch):
        other.unseal("record", "n", OBJ.seal("record", "n", b"body"))


def test_the_associated_data_binds_each_part_and_a_name_that_is_not_utf8():
    parts = [("r", "object", "n", b""), ("r2", "object", "n", b""), ("r", "record", "n", b""),
             ("r", "object", "n2", b""), ("r", "object", "n", b"\x01")]
    assert len({c.associated_data(*p) for p in parts}) == len(parts)
    ad = c.associated_data("r", "object", "bad\udcff")  # a file name with an undecodable byte
    assert ad.startswith(b"blobstate/v1\x00") and b"bad\xed\xb3\xbf" in ad


@pytest.mark.parametrize("size", [0, 31, 33, 16])
def test_a_data_key_must_be_32_bytes(size):
    with pytest.raises(ValueError, match="a data key is 32 bytes"):
        ObjectCipher(bytes(size), "r")


def test_the_repr_names_the_repository_and_never_the_key():
    text = repr(OBJ) + str(OBJ)
    assert "repo-1" in text and "AES-256-GCM" in text
    assert KEY.hex() not in text and str(KEY) not in text and "_key" not in text


@pytest.mark.parametrize("pieces", [[b""], [b"x"], [b"ab", b"", b"cdef" * 1000, b"g"]])
def test_a_streamed_object_round_trips_and_its_tag_is_checked_at_the_end(pieces):
    header = b"BSE1\x03"
    nonce, enc = OBJ.encryptor("job/0/s/blobs/ab", header)
    ciphertext = b"".join(enc.update(p) for p in pieces) + enc.finalize()
    tag = enc.tag
    dec, finish = OBJ.decryptor("job/0/s/blobs/ab", header, nonce)
    assert dec.update(ciphertext) == b"".join(pieces)
    finish(tag)
    for name, hdr, bad_tag in [("job/0/s/blobs/cd", header, tag), ("job/0/s/blobs/ab", b"BSE1\x00", tag),
                               ("job/0/s/blobs/ab", header, bytes(16)), ("job/0/s/blobs/ab", header, tag[:4])]:
        dec, finish = OBJ.decryptor(name, hdr, nonce)
        dec.update(ciphertext)
        with pytest.raises(ChecksumMismatch, match=f"the object {name} does not authenticate"):
            finish(bad_tag)


def test_without_cryptography_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"an encrypted repository needs .*not installed.*encrypt"):
        OBJ.seal("record", "n", b"x")
