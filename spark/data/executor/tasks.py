"""The executor side of state as data: one Spark task per partition reads its state (or its changes) out as Arrow
record batches, or writes a new partition from the rows Spark's hash sent it. Spark-agnostic but for the task
context it reads.

- ``read_task`` (``mapInArrow`` over a DataFrame of one slot number per task): the slot's partition's chain (the
  driver's choice: snapshot, then deltas) is restored into a scratch directory of the executor
  (``blobstate.worker.restore_into``: every file and changelog checked against its record; the directory
  held while used and removed after, ``blobstate.spark.executor.leftovers``) and read key by key
  (``blobstate.worker.entries.open_entries``: nothing unpickled), ``ROWS_PER_BATCH`` entries per record batch.
  ``change_task`` does the same with the partition's delta changelogs (``blobstate.worker.read_changes``).
- Columns: ``key`` and ``value`` hold each entry of the column's type (``string``, ``binary``, ``bigint``,
  ``double``, ``boolean``: ``COLUMN_TYPES``); an entry of another type (an int in a string column, a bigger int than
  64 bits, a raw pickle) has them null and its stored bytes in ``key_raw``/``value_raw`` (``entries.encode``), so
  a read loses nothing and ``write_state`` writes it back exactly.
- ``write_task`` (``mapInArrow`` after ``repartition(N, *key_cols)``): the rows of shuffle partition ``p`` are
  written into a fresh RocksDB (``WRITE_BATCH_OPS`` per ``WriteBatch``); a key that arrives twice or a row that
  cannot be stored is reported (``Written.problems``), never written, and nothing is uploaded; otherwise the local
  checkpoint is staged as partition ``p``'s snapshot with a TTL (``blobstate.worker.stage_snapshot``). The
  driver commits every partition's snapshot in one group record; what a failed or superseded attempt uploaded is
  never referenced and expires by its TTL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError
from blobstate.model.chain import Chain
from blobstate.model.layout import now_ms
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.spark.data.executor.variables import VariableRead, change_batches, state_batches
from blobstate.spark.executor.identity import task_identity, task_partition
from blobstate.spark.executor.leftovers import scratch_dir
from blobstate.spark.executor.rows import pickled_batch
from blobstate.worker import (
    Repository,
    StagedSnapshot,
    entries,
    local_checkpoint,
    open_repository,
    read_changes,
    restore_into,
    stage_snapshot,
)

if TYPE_CHECKING:
    import pyarrow as pa

ROWS_PER_BATCH = 10_000  # entries per Arrow record batch a read task yields
WRITE_BATCH_OPS = 10_000  # keys per RocksDB WriteBatch while a new partition is filled
#: the Spark type of a key or value column -> the Python type it holds (bool is not an int here)
COLUMN_TYPES = {"string": str, "binary": bytes, "bigint": int, "double": float, "boolean": bool}
_ALIASES = {"long": "bigint", "str": "string", "bytes": "binary", "float64": "double", "bool": "boolean"}
_INT64 = (-(2**63), 2**63 - 1)


def column_type(name: str) -> str:
    """The Spark type name of a key or value column (``COLUMN_TYPES``; ``long`` is ``bigint``). Raises
    ``ConfigurationError`` for another."""
    name = _ALIASES.get(name.lower(), name.lower())
    if name not in COLUMN_TYPES:
        raise ConfigurationError(f"a key or value column is one of {', '.join(COLUMN_TYPES)}, not {name!r}")
    return name


@dataclass(frozen=True)
class RepositoryRef:
    """How a task opens the repository (picklable): its URL, the checkpoint log's URL, the storage options and the
    log's options, and the driver's ``settings``."""

    url: str
    log_url: str | None = None
    storage_options: dict[str, Any] | None = None
    log_options: dict[str, Any] | None = None
    settings: Settings = field(default_factory=Settings)

    def open(self, *, create: bool = False, executor: bool = False) -> Repository:
        """The repository with the driver's settings (on an ``executor``: as it runs with them,
        ``Settings.on_executor``); an empty location becomes one only with ``create`` (``Repository.open``)."""
        return open_repository(self.url, log_url=self.log_url, storage_options=self.storage_options,
                               log_options=self.log_options, create=create,
                               settings=self.settings.on_executor() if executor else self.settings)


@dataclass(frozen=True)
class TaskInfo:
    """Which Spark task read a partition: ``partition_id`` and ``attempt_id`` (``TaskContext``), the worker's
    ``pid``."""

    partition_id: int
    attempt_id: int
    pid: int


@dataclass(frozen=True)
class ReadPlan:
    """What every read task gets (picklable): the store ``key``, ``slots[i] = (partition, chain)`` read by the task
    of slot ``i`` (partition None: a driver store) or ``(partition, delta records)`` with ``changes``, the columns'
    ``key_type`` and ``value_type``, the executors' ``local_dir`` (None: their temporary directory) and
    ``on_task(partition, TaskInfo)``, called in the task once its partition is restored (observability, tests);
    ``scratch``: the name of its scratch directories (``<scratch>-p<partition>-...``, swept once abandoned);
    ``variable``: a processor's state variable or timers to read instead of the raw entries (``variables``)."""

    repo: RepositoryRef
    key: StoreKey
    slots: tuple[tuple[int | None, Any], ...]
    key_type: str = "string"
    value_type: str = "string"
    local_dir: str | None = None
    changes: bool = False
    on_task: Callable[[int | None, TaskInfo], None] | None = None
    scratch: str = "blobstate-read"
    variable: VariableRead | None = None
    key_groups: int = 0  # a key-grouped store's: keys read by the user's key (``entries.user_key``)


def task_info() -> TaskInfo:
    """The running Spark task (zeros outside one)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return TaskInfo(0, 0, os.getpid())
    return TaskInfo(int(context.partitionId()), int(context.taskAttemptId()), os.getpid())


def _arrow_type(type_name: str) -> Any:
    import pyarrow as pa

    return {"string": pa.string(), "binary": pa.binary(), "bigint": pa.int64(), "double": pa.float64(),
            "boolean": pa.bool_()}[type_name]


def _fits(value: Any, python: type) -> bool:
    return value is None or (type(value) is python and (python is not int or _INT64[0] <= value <= _INT64[1]))


def _column(values: list[Any], type_name: str) -> tuple[Any, list[bytes | None] | None]:
    """``(Arrow array of the values that fit the column, the others' stored bytes or None)``; None values (a
    delete's) are null in both."""
    import pyarrow as pa

    python, arrow = COLUMN_TYPES[type_name], _arrow_type(type_name)
    if all(type(v) is python for v in values) and (python is not int or not values or (
            _INT64[0] <= min(values) and max(values) <= _INT64[1])):
        return pa.array(values, type=arrow), None  # the common case: one C pass
    fits = [_fits(v, python) for v in values]
    return (pa.array([v if ok else None for v, ok in zip(values, fits, strict=True)], type=arrow),
            [None if ok else entries.encode(v) for v, ok in zip(values, fits, strict=True)])


def arrow_batch(fixed: dict[str, Any], keys: list[Any], values: list[Any], plan: ReadPlan) -> pa.RecordBatch:
    """One record batch: the ``fixed`` columns (``partition`` one value, ``batch_id`` and ``op`` a list each),
    then ``key``, ``value``, ``key_raw``, ``value_raw``."""
    import pyarrow as pa

    n = len(keys)
    types = {"partition": pa.int32(), "batch_id": pa.int64(), "op": pa.string()}
    columns = {name: pa.array(v if isinstance(v, list) else [v] * n, type=types[name]) for name, v in fixed.items()}
    key_col, key_raw = _column(keys, plan.key_type)
    value_col, value_raw = _column(values, plan.value_type)
    columns.update(key=key_col, value=value_col, key_raw=pa.array(key_raw or [None] * n, type=pa.binary()),
                   value_raw=pa.array(value_raw or [None] * n, type=pa.binary()))
    return pa.RecordBatch.from_pydict(columns)


def read_task(plan: ReadPlan, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A read task (``mapInArrow``): the slots its input rows name (one per task), each partition's entries or
    changes as record batches. Raises what the restore raises (``IntegrityError``, ``BrokenChainError``)."""
    repo = plan.repo.open(executor=True)
    try:
        for batch in batches:
            for slot in batch.column(0).to_pylist():
                partition, what = plan.slots[int(slot)]
                if plan.changes:
                    yield from _changes(repo, plan, partition, what)
                else:
                    yield from _entries(repo, plan, partition, what)
    finally:
        repo.close()


def _entries(repo: Repository, plan: ReadPlan, partition: int | None, chain: Chain) -> Iterator[pa.RecordBatch]:
    with scratch_dir(plan.local_dir, f"{plan.scratch}-p{partition}-") as base:
        path = restore_into(repo, chain, base)
        if plan.on_task is not None:
            plan.on_task(partition, task_info())
        if path is None:
            return
        if plan.variable is not None:
            yield from _variable(plan.variable, path, partition)
            return
        with entries.open_entries(path, plan.key_groups) as items:
            keys: list[Any] = []
            values: list[Any] = []
            for key, value in items:
                keys.append(key)
                values.append(value)
                if len(keys) >= ROWS_PER_BATCH:
                    yield arrow_batch({"partition": partition}, keys, values, plan)
                    keys, values = [], []
            if keys:
                yield arrow_batch({"partition": partition}, keys, values, plan)


def _variable(read: VariableRead, path: str, partition: int | None) -> Iterator[pa.RecordBatch]:
    from rocksdict import AccessType, Rdict

    db = Rdict(path, access_type=AccessType.read_only())
    try:
        yield from state_batches(read, db, partition)
    finally:
        db.close()


def _changes(repo: Repository, plan: ReadPlan, partition: int | None,
             records: tuple[Checkpoint, ...]) -> Iterator[pa.RecordBatch]:
    if plan.on_task is not None:
        plan.on_task(partition, task_info())
    if plan.variable is not None:
        yield from change_batches(plan.variable, read_changes(repo, records, partition), partition)
        return
    rows: list[Any] = []
    for change in read_changes(repo, records, partition, plan.key_groups):
        rows.append(change)
        if len(rows) >= ROWS_PER_BATCH:
            yield _change_batch(rows, partition, plan)
            rows = []
    if rows:
        yield _change_batch(rows, partition, plan)


def _change_batch(rows: list[Any], partition: int | None, plan: ReadPlan) -> pa.RecordBatch:
    return arrow_batch({"batch_id": [c.batch_id for c in rows], "partition": partition,
                        "op": [c.op for c in rows]}, [c.key for c in rows], [c.value for c in rows], plan)


# -- writing ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WritePlan:
    """What every write task gets: the new store ``key``, the batch its snapshots cover, the blobs' TTL (ms), the
    executors' ``local_dir`` and the name of the scratch directories there."""

    repo: RepositoryRef
    key: StoreKey
    batch_id: int
    ttl_ms: int
    local_dir: str | None = None
    scratch: str = "blobstate-write"


@dataclass(frozen=True)
class Written:
    """A write task's answer: new partition ``partition`` holds ``keys`` keys, staged as ``staged`` (None when it
    found ``problems``: keys that arrived twice, rows that cannot be stored, shown with ``repr``) by Spark task
    ``attempt``; ``created_ms``: when its upload began (the group commit's TTL budget counts from the oldest)."""

    partition: int
    attempt: int
    keys: int
    staged: StagedSnapshot | None
    created_ms: int
    problems: tuple[str, ...] = ()
    duplicates: bool = False


def entry(key: Any, value: Any, key_raw: Any, value_raw: Any) -> tuple[Any, Any] | str:
    """The ``(key, value)`` a row stores (a null typed column falls back to its raw bytes), or why it cannot be
    stored: a null, raw bytes of no type rocksdict writes (a raw pickle value is fine: written back as it was)."""
    key = entries.decode(bytes(key_raw)) if key is None and key_raw is not None else key
    value = entries.decode(bytes(value_raw)) if value is None and value_raw is not None else value
    if key is None or value is None:
        return f"a row with a null {'key' if key is None else 'value'} (key {key!r:.100})"
    if isinstance(key, entries.Undecoded) or (isinstance(value, entries.Undecoded) and
                                              value.data[:1] != bytes((entries.PICKLE,))):
        return f"key {key!r:.100}: raw bytes of no type rocksdict stores"
    return (bytes(key) if isinstance(key, bytearray) else key), (bytes(value) if isinstance(value, bytearray)
                                                                 else value)


def row_entries(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[Any, Any] | str]:
    """``entry`` of every row of ``batches`` (columns ``key``, ``value``, ``key_raw``, ``value_raw``)."""
    for batch in batches:
        cols = [batch.column(name).to_pylist() for name in ("key", "value", "key_raw", "value_raw")]
        for row in zip(*cols, strict=True):
            yield entry(*row)


def fill(db: Any, rows: Iterable[tuple[Any, Any] | str]) -> tuple[int, list[str], bool]:
    """Write ``rows`` into the open ``db``; returns the number of keys, (up to 5) problems, and whether a key
    arrived twice. A raw pickle value is written back byte for byte (never unpickled)."""
    from rocksdict import WriteBatch

    keys, problems, duplicates = 0, [], False
    pending: set[tuple[type, Any]] = set()
    batch = WriteBatch()
    batch.set_dumps(_raw_pickle)
    for row in rows:
        if isinstance(row, str) or (type(row[0]), row[0]) in pending or row[0] in db:
            duplicates = duplicates or not isinstance(row, str)
            if len(problems) < 5:
                problems.append(row if isinstance(row, str) else f"key {row[0]!r:.200} arrives twice")
            continue
        key, value = row
        pending.add((type(key), key))
        batch.put(key, value)
        keys += 1
        if len(pending) >= WRITE_BATCH_OPS:
            db.write(batch)
            batch, pending = WriteBatch(), set()
            batch.set_dumps(_raw_pickle)
    if not batch.is_empty():
        db.write(batch)
    return keys, problems, duplicates


def _raw_pickle(value: entries.Undecoded) -> bytes:
    return value.data[1:]  # rocksdict puts its type byte 6 back in front


def write_partition(plan: WritePlan, partition: int, rows: Iterable[tuple[Any, Any] | str]) -> Written:
    """New partition ``partition`` written from ``rows`` (``row_entries``) and staged. Raises ``StorageError``
    from the upload."""
    from rocksdict import Rdict

    task = task_identity()  # the part records Spark's task attempt id (unique in the SparkContext), as a batch's do
    attempt = task.attempt
    with scratch_dir(plan.local_dir, f"{plan.scratch}-p{partition}-") as base:
        target = os.path.join(base, "checkpoint")
        db = Rdict(os.path.join(base, "db"))
        try:
            keys, problems, duplicates = fill(db, rows)
            if not problems:
                db.flush(True)
                local_checkpoint(db, target, settings=plan.repo.settings)
        finally:
            db.close()
        created = now_ms()
        if problems:
            return Written(partition, attempt, keys, None, created, tuple(problems), duplicates)
        repo = plan.repo.open(executor=True)
        try:
            staged = stage_snapshot(repo, plan.key, partition=partition, batch_id=plan.batch_id,
                                    checkpoint_dir=target, previous=None, ttl_ms=plan.ttl_ms,
                                    attempt=task.task_attempt_id, writer_id=f"write-partition-{partition}")
        finally:
            repo.close()
        return Written(partition, attempt, keys, staged, created)


def write_task(plan: WritePlan, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A write task (``mapInArrow`` after ``repartition(N, *key_cols)``): shuffle partition
    ``TaskContext.partitionId()`` written and staged; one pickled ``Written`` back."""
    yield pickled_batch(write_partition(plan, task_partition(), row_entries(batches)))
