"""A stateful processor's driver store committed the way the driver binding commits it, without Spark: each batch
run by the processor runtime on a real RocksDB, its staged writes committed as the batch's delta record (the
changelog), optionally a snapshot after one batch (``retain=1``: the deltas before it pruned)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from rocksdict import Rdict

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.model import changelog
from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.model.records import StoreKey
from blobstate.spark.processor import BatchTimes, ProcessorSpec, StateReader, run_batch

BASE_MS = 1_700_000_000_000


def commit_batches(tmp_path: Path, make: Any, spec: ProcessorSpec, frames: list[pd.DataFrame], state_var: str, *,
                   key: StoreKey = StoreKey("j", "0", "s"), snapshot_at: int | None = None) -> tuple[str, dict]:
    """Run ``frames`` through ``make()`` batch by batch (batch ``i`` at ``BASE_MS + i``) and commit each to a
    ``file://`` repository under ``tmp_path``; returns its URL and ``{batch: rows of state_var after it}`` as the
    runtime's own reader gives them, each with ``partition_id`` None."""
    repo = f"file://{tmp_path}/repo"
    db = Rdict(str(tmp_path / "live"))
    expected = {}
    try:
        with StoreCommitter(key, repo, work_dir=str(tmp_path / "work"), retain=1) as committer:
            deltas = DeltaCommitter(committer)
            for batch, frame in enumerate(frames):
                view = StagedWrites(db)
                run_batch(make(), view, pa.Table.from_pandas(frame, preserve_index=False), spec,
                          BatchTimes(batch, BASE_MS + batch))
                deltas.commit_changelog(changelog.encode(view.ops()), batch_id=batch, query_id="q")
                apply_ops(db, view.ops())
                if batch == snapshot_at:
                    db.flush(True)
                    committer.backup(db, batch_id=batch)
                rows = StateReader(db).read_variable(state_var).to_pylist()
                expected[batch] = [dict(r, partition_id=None) for r in rows]
    finally:
        db.close()
    return repo, expected
