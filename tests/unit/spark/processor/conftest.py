"""Fixtures of the processor runtime's unit tests: a real RocksDB (``rocksdict.Rdict`` under ``tmp_path``), batches
staged on it as a partition task stages them (``StagedWrites``, applied in one ``WriteBatch``), and a virtual clock:
every batch is given its processing time and watermark, nothing reads the wall clock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from rocksdict import Rdict

from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.spark.processor.runner import BatchResult, BatchTimes, ProcessorSpec, run_batch


@pytest.fixture
def db(tmp_path) -> Iterator[Rdict]:
    handle = Rdict(str(tmp_path / "db"))
    yield handle
    handle.close()


class Batches:
    """Runs batches of one processor on ``db``, each committed (applied) unless ``commit=False``."""

    def __init__(self, db: Rdict, make: Any, spec: ProcessorSpec) -> None:
        self.db, self.make, self.spec = db, make, spec
        self.batch_id = 0
        self.last_ops: list[Any] = []

    def run(self, data: Any, at: int, *, watermark: int | None = None, late: int | None = None,
            commit: bool = True, initial_state: Any = None) -> BatchResult:
        view = StagedWrites(self.db)
        result = run_batch(self.make(), view, data, self.spec,
                           BatchTimes(self.batch_id, at, watermark, late), initial_state=initial_state)
        self.last_ops = view.ops()
        if commit:
            apply_ops(self.db, self.last_ops)
            self.batch_id += 1
        return result


def raw_keys(db: Rdict, first_byte: int) -> list[bytes]:
    """Every key of ``db`` in the key space starting with ``first_byte`` (what is really in RocksDB)."""
    return [k for k, _ in db.items() if isinstance(k, bytes) and k[:1] == bytes((first_byte,))]
