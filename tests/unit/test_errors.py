"""``blobstate.errors``: every typed error maps to one of the documented exit codes, the exit code a docstring
names is the one the class carries, and the errors that carry data keep it."""

from __future__ import annotations

import inspect
import re

import pytest

from blobstate import errors

DOCUMENTED = {"EXIT_OK": 0, "EXIT_ERROR": 1, "EXIT_USAGE": 2, "EXIT_INTEGRITY": 3, "EXIT_FENCED": 4,
              "EXIT_NOTHING_TO_RESTORE": 5, "EXIT_NO_REPOSITORY": 6}


def _error_classes() -> list[type[errors.BlobstateError]]:
    return [obj for _, obj in inspect.getmembers(errors, inspect.isclass)
            if issubclass(obj, errors.BlobstateError) and obj.__module__ == errors.__name__]


def test_the_exit_code_constants_are_the_documented_ones_and_distinct():
    assert {name: getattr(errors, name) for name in DOCUMENTED} == DOCUMENTED
    assert len(set(DOCUMENTED.values())) == len(DOCUMENTED)
    doc = " ".join(errors.__doc__.split())
    for word, code in (("ok", 0), ("error", 1), ("usage", 2), ("integrity", 3), ("fenced", 4)):
        assert f"{code} {word}" in doc


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_exits_with_a_documented_nonzero_code(cls):
    assert cls.exit_code in set(DOCUMENTED.values()) - {errors.EXIT_OK}


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_an_exit_code_named_in_a_docstring_is_the_one_the_class_carries(cls):
    doc = " ".join((cls.__doc__ or "").split())
    named = {int(n) for n in re.findall(r"\bexit (?:code )?(\d)\b", doc)}
    assert named <= {cls.exit_code}, f"{cls.__name__} documents exit {named}, carries {cls.exit_code}"


def test_the_documented_families_carry_their_codes():
    assert errors.ConfigurationError.exit_code == errors.MissingDependencyError.exit_code == errors.EXIT_USAGE
    for cls in (errors.ChecksumMismatch, errors.CorruptIndexError, errors.CorruptJournalError, errors.BlobNotFound,
                errors.UnsafePathError, errors.EncryptionKeyError, errors.ForeignObjectError, errors.TreeInvalid):
        assert cls.exit_code == errors.EXIT_INTEGRITY
    for cls in (errors.BrokenChainError, errors.StateNotHeld, errors.BatchNotCommitted, errors.BatchNotRetained):
        assert cls.exit_code == errors.EXIT_NOTHING_TO_RESTORE
    assert errors.RepositoryNotFound.exit_code == errors.BucketNotFoundError.exit_code == errors.EXIT_NO_REPOSITORY
    assert errors.RestoreRefused.exit_code == errors.UnsafeDestination.exit_code == errors.EXIT_USAGE
    assert errors.LocalStoreError.exit_code == errors.StorageError.exit_code == errors.EXIT_ERROR


def test_an_unknown_append_outcome_is_a_transient_fault_that_names_its_record():
    exc = errors.AppendOutcomeUnknown("timed out", checkpoint_id="ck-1")
    assert isinstance(exc, errors.TransientStorageError) and exc.checkpoint_id == "ck-1"
    assert str(exc) == "timed out"


def test_the_errors_that_carry_data_keep_it():
    missing = errors.BlobNotFound("ab12", "deleted")
    assert missing.blob_id == "ab12" and str(missing) == "blob not found: ab12 (deleted)"
    assert str(errors.BlobNotFound("ab12")) == "blob not found: ab12"
    fenced = errors.FencedError("stale", expected=3, actual=4)
    assert (fenced.expected, fenced.actual) == (3, 4)
    assert errors.DivergedTargetError("moved", own=("a", "b")).own == ("a", "b")
    held = errors.StateNotHeld("no chain", needed=7, holds="3..5")
    assert (held.needed, held.holds) == (7, "3..5")
    retained = errors.BatchNotRetained("gone", oldest=None, newest=9)
    assert (retained.oldest, retained.newest) == (None, 9)


def test_every_storage_location_error_names_one_documented_reason():
    reasons = {cls.reason for cls in _error_classes()
               if issubclass(cls, errors.StorageLocationError) and cls is not errors.StorageLocationError}
    assert reasons == {"missing-bucket", "access-denied", "wrong-region", "unreachable"}
