"""The executor side of ``blobstate.spark.rescale``: an old partition's committed state read out as rows, a new
partition's RocksDB written from the rows Spark's hash sent it and staged as a snapshot. Spark-agnostic but for
the task context it reads.

Job 1, one task per old partition (``read_partitions``): the partition's chain (the driver's choice: snapshot,
then deltas) is restored into a temporary directory (``blobstate.restoring.chain.restore_chain``: every file and
changelog checked against its record) and read key by key. Each key becomes one row: the key columns
``key_of(key)`` gives (checked against the key schema's types, so that Spark hashes them as the streaming query
does), the key and its value as a one-op changelog (``blobstate.model.changelog.encode``: their types are kept exactly,
nothing is pickled), and an error (None, or why the key cannot be mapped: ``key_of`` raised, or returned the wrong
number or types of values).

Job 2, one task per new partition (``write_partition``): the rows Spark's hash partitioning sent to partition ``p``
are written into a fresh RocksDB (in ``WriteBatch`` es of ``WRITE_BATCH_OPS``); a key that arrives twice (the same
key held by two old partitions: an ``update`` that wrote a key its row's key columns do not determine) is
reported, never silently overwritten, and nothing is uploaded. Otherwise the database's local checkpoint is staged
as partition ``p``'s snapshot with a TTL (``blobstate.commit.group.stage_snapshot``) and a ``Written`` returned;
the driver commits every partition's snapshot in one group record. What a failed or superseded attempt uploaded is
never referenced and expires by its TTL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from blobstate.commit.group import StagedSnapshot
from blobstate.model import changelog
from blobstate.model.chain import Chain
from blobstate.model.layout import now_ms
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
from blobstate.spark.leftovers import scratch_dir

WRITE_BATCH_OPS = 10_000  # keys per RocksDB WriteBatch while a new partition is filled
KeyOf = Callable[[Any], Sequence[Any]]
#: Spark type name -> the Python types a key column of that type accepts (others are left to Spark's own check).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "long": (int,), "short": (int,), "byte": (int,), "boolean": (bool,),
    "double": (float, int), "float": (float, int), "binary": (bytes, bytearray),
}


@dataclass(frozen=True)
class RepositoryRef:
    """How a task opens the repository (picklable): its URL, the checkpoint log's URL, the storage options and the
    log's options."""

    url: str
    log_url: str | None = None
    storage_options: dict[str, Any] | None = None
    log_options: dict[str, Any] | None = None

    def open(self) -> Repository:
        return Repository.open(self.url, log=self.log_url, storage_options=self.storage_options,
                               log_options=self.log_options, create=False)


@dataclass(frozen=True)
class ReadPlan:
    """Job 1's plan: the source group ``key``, each old partition's ``chains[p]``, ``key_of``, the key columns'
    ``fields`` (name, Spark type name, nullable) and ``local_dir`` (None: the executor's temporary directory)."""

    repo: RepositoryRef
    key: StoreKey
    chains: dict[int, Chain]
    key_of: KeyOf
    fields: tuple[tuple[str, str, bool], ...]
    local_dir: str | None = None


@dataclass(frozen=True)
class WritePlan:
    """Job 2's plan: the new group ``key``, the batch its snapshots cover, the blobs' TTL (ms), ``local_dir``."""

    repo: RepositoryRef
    key: StoreKey
    batch_id: int
    ttl_ms: int
    local_dir: str | None = None


@dataclass(frozen=True)
class Written:
    """A job 2 task's answer: new partition ``partition`` holds ``keys`` keys, staged as ``staged`` (None when it
    found ``duplicates``: keys that arrived twice, shown with ``repr``) by Spark task ``attempt``; ``created_ms``:
    when its upload began (the group commit's TTL budget counts from the oldest)."""

    partition: int
    attempt: int
    keys: int
    staged: StagedSnapshot | None
    created_ms: int
    duplicates: tuple[str, ...] = ()


def check_values(values: Any, fields: Sequence[tuple[str, str, bool]]) -> str | None:
    """Why ``values`` (what ``key_of`` returned) cannot be a row of the key columns ``fields``; None when it can."""
    names = ", ".join(f[0] for f in fields)
    if not isinstance(values, tuple | list) or len(values) != len(fields):
        return f"key_of returned {values!r:.100}, not a tuple of {len(fields)} values ({names})"
    for value, (name, type_name, nullable) in zip(values, fields, strict=True):
        if value is None:
            if not nullable:
                return f"key_of returned None for the non-null column {name}"
            continue
        expected = _PYTHON_TYPES.get(type_name)
        if expected is not None and (not isinstance(value, expected) or (
                isinstance(value, bool) and bool not in expected)):
            return f"key_of returned {name}={value!r:.100}, which is not a Spark {type_name}"
    return None


def _row(plan: ReadPlan, key: Any, value: Any) -> tuple[Any, ...]:
    try:
        values = plan.key_of(key)
        problem = check_values(values, plan.fields)
    except Exception as exc:  # noqa: BLE001 - a user function: its failure is reported with the key
        problem = f"key_of raised {type(exc).__name__}: {str(exc)[:200]}"
    if problem is not None:
        return (None,) * len(plan.fields) + (None, f"key {key!r:.200}: {problem}")
    return (*values, changelog.encode([(changelog.PUT, key, value)]), None)


def is_error(row: Sequence[Any]) -> bool:
    """A row of job 1 that names a key ``key_of`` cannot map (its last column)."""
    return row[-1] is not None


def read_partitions(plan: ReadPlan, partitions: Iterable[int]) -> Iterator[tuple[Any, ...]]:
    """Job 1 (``mapPartitions`` over the old partition numbers): every key of every partition in ``partitions``, as
    rows ``(*key columns, op, error)``. Raises what the restore raises (``IntegrityError``, ``BrokenChainError``)."""
    from rocksdict import AccessType, Rdict

    from blobstate.repository.backends import open_local_store
    from blobstate.restoring.chain import restore_chain

    repo = plan.repo.open()
    try:
        for p in partitions:
            with scratch_dir(plan.local_dir, f"blobstate-rescale-read-p{p}-") as base:
                dest = os.path.join(base, "db")
                restore_chain(repo, plan.chains[p], dest, local_store=open_local_store("rocksdb"),
                              store_type="rocksdb", work_dir=os.path.join(base, "work"), force=True)
                db = Rdict(dest, access_type=AccessType.read_only())
                try:
                    for key, value in db.items():
                        yield _row(plan, key, value)
                finally:
                    db.close()
    finally:
        repo.close()


def _fill(db: Any, rows: Iterable[Any]) -> tuple[int, list[str]]:
    """Write the rows' ops into ``db``; returns the number of keys and (up to 5) keys that arrived twice."""
    keys, duplicates = 0, []
    pending: dict[tuple[type, Any], None] = {}
    ops: list[changelog.Op] = []
    for row in rows:
        (op,) = changelog.decode(bytes(row["_blobstate_op"]), source="a rescale row")
        key = op[1]
        if (type(key), key) in pending or key in db:
            if len(duplicates) < 5:
                duplicates.append(repr(key)[:200])
            continue
        pending[(type(key), key)] = None
        ops.append(op)
        keys += 1
        if len(ops) >= WRITE_BATCH_OPS:
            changelog.apply_ops(db, ops)
            ops, pending = [], {}
    if ops:
        changelog.apply_ops(db, ops)
    return keys, duplicates


def write_partition(plan: WritePlan, partition: int, rows: Iterable[Any]) -> Iterator[Written]:
    """Job 2 (``mapPartitionsWithIndex`` after ``repartition(M, *key_cols)``): new partition ``partition`` written
    and staged; yields one ``Written``. Raises ``StorageError`` from the upload, ``CorruptIndexError`` for a row
    that is not a changelog op."""
    from rocksdict import Rdict

    from blobstate.commit.group import stage_snapshot
    from blobstate.repository.backends import open_local_store
    from blobstate.spark.partition_task import task_attempt

    attempt = task_attempt()
    with scratch_dir(plan.local_dir, f"blobstate-rescale-write-p{partition}-") as base:
        target = os.path.join(base, "checkpoint")
        db = Rdict(os.path.join(base, "db"))
        try:
            keys, duplicates = _fill(db, rows)
            if not duplicates:
                db.flush(True)
                open_local_store("rocksdb").create_checkpoint(db, target)
        finally:
            db.close()
        created = now_ms()
        if duplicates:
            yield Written(partition, attempt, keys, None, created, tuple(duplicates))
            return
        repo = plan.repo.open()
        try:
            staged = stage_snapshot(repo, plan.key, partition=partition, batch_id=plan.batch_id,
                                    checkpoint_dir=target, previous=None, ttl_ms=plan.ttl_ms, attempt=attempt,
                                    writer_id=f"rescale-partition-{partition}")
        finally:
            repo.close()
        yield Written(partition, attempt, keys, staged, created)
