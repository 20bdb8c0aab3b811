"""``call_with_retry`` makes the first attempt itself and hands tenacity only a call whose first attempt failed
transiently (issue 31: tenacity's import is left out of a command whose calls all succeed): the attempts, the
retried-call log lines and the errors are those of a ``Retrying`` around every attempt."""

from __future__ import annotations

import logging

import pytest

from blobstate.errors import BlobNotFound, StorageError, TransientStorageError
from blobstate.repository.retry import call_with_retry


class Flaky:
    """Raises ``faults`` in turn, then returns ``"ok"``; counts its calls."""

    def __init__(self, *faults: BaseException) -> None:
        self.faults = list(faults)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.faults:
            raise self.faults.pop(0)
        return "ok"


def test_a_call_that_succeeds_is_made_once():
    fn = Flaky()
    assert call_with_retry(fn, "read of x", attempts=3) == "ok"
    assert fn.calls == 1


def test_a_transient_first_attempt_is_retried_with_one_log_line_per_retry(caplog):
    fn = Flaky(TransientStorageError("slow down"), ConnectionError("reset"))
    with caplog.at_level(logging.INFO, logger="blobstate.repository.retry"):
        assert call_with_retry(fn, "read of x", attempts=3) == "ok"
    assert fn.calls == 3
    assert [r.getMessage() for r in caplog.records] == ["retrying read of x after TransientStorageError: slow down",
                                                        "retrying read of x after ConnectionError: reset"]


def test_transient_faults_outlasting_the_attempts_become_one_storage_error():
    fn = Flaky(*(ConnectionError(f"down {i}") for i in range(5)))
    with pytest.raises(StorageError, match=r"^read of x failed after 3 attempts: ConnectionError: down 2$") as info:
        call_with_retry(fn, "read of x", attempts=3)
    assert fn.calls == 3
    assert isinstance(info.value.__cause__, ConnectionError)


def test_a_single_attempt_that_fails_transiently_is_not_retried():
    fn = Flaky(ConnectionError("down"))
    with pytest.raises(StorageError, match="failed after 1 attempts"):
        call_with_retry(fn, "read of x", attempts=1)
    assert fn.calls == 1


@pytest.mark.parametrize("first", [True, False], ids=["first attempt", "after a retry"])
def test_a_permanent_fault_passes_through_at_once(first):
    missing = BlobNotFound("no such blob")
    fn = Flaky(missing) if first else Flaky(TransientStorageError("slow down"), missing)
    with pytest.raises(BlobNotFound) as info:
        call_with_retry(fn, "read of x", attempts=5)
    assert info.value is missing
    assert fn.calls == (1 if first else 2)


def test_an_sdk_error_becomes_a_storage_error_naming_the_call():
    fn = Flaky(ZeroDivisionError("boom"))
    with pytest.raises(StorageError, match=r"^read of x failed: ZeroDivisionError: boom$"):
        call_with_retry(fn, "read of x", attempts=5)
    assert fn.calls == 1
