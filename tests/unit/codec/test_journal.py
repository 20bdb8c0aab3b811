"""``blobstate.codec.journal``: a record as an encrypted repository's journal keeps it (issue 39 case 9)."""

from __future__ import annotations

import os

import pytest

from blobstate.codec.cipher import ObjectCipher
from blobstate.codec.journal import SEALED, open_record, seal_record
from blobstate.errors import ConfigurationError, CorruptJournalError, IntegrityError

RECORD = '{"checkpointId":"1-a","changelogInline":"c2VjcmV0LXZhbHVl"}'


def test_a_record_is_kept_sealed_and_opens_again_only_under_its_own_name() -> None:
    cipher = ObjectCipher(os.urandom(32), "repo")
    kept = seal_record(cipher, "j/t/s/1-a", RECORD)
    assert kept.startswith(SEALED) and "c2VjcmV0" not in kept
    assert open_record(cipher, "j/t/s/1-a", kept) == RECORD
    with pytest.raises(IntegrityError):
        open_record(cipher, "j/t/s/1-b", kept)  # another commit's
    with pytest.raises(IntegrityError):
        open_record(ObjectCipher(os.urandom(32), "repo"), "j/t/s/1-a", kept)  # another key
    with pytest.raises(CorruptJournalError):
        open_record(cipher, "j/t/s/1-a", SEALED + "not base64!")
    with pytest.raises(ConfigurationError):
        open_record(None, "j/t/s/1-a", kept)


def test_an_unencrypted_repository_keeps_the_record_as_it_is() -> None:
    assert seal_record(None, "j/t/s/1-a", RECORD) == RECORD
    assert open_record(None, "j/t/s/1-a", RECORD) == RECORD
    assert open_record(ObjectCipher(os.urandom(32), "repo"), "j/t/s/1-a", RECORD) == RECORD  # an older journal
