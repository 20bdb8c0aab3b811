"""Bootstrap a store from a DataFrame: ``write_state`` writes a new store's keys and values, committed as one record.

``write_state(df, repo=..., job=..., store=..., num_partitions=N, key_cols=[...])`` takes a DataFrame of the key
columns, a ``key`` and a ``value`` column (``str``/``bytes``/``int``/``float``/``bool`` as Spark's ``string``,
``binary``, integral, ``float``/``double`` and ``boolean`` types; the ``key_raw``/``value_raw`` columns of
``read_state``, when present, fill a null key or value with its stored bytes) and writes them as a new store,
so that a query can start from state computed elsewhere (a batch job, another system, an offline fix):

1. the destination store key must hold no record (``DestinationNotEmpty``, exit 2, nothing written) once its
   journal in ``work_dir`` is recovered: a write killed before its commit point is aborted there (its uploads
   deleted) and this one starts afresh; one killed after it is finished (its TTLs removed) and this one is refused
   with ``StateAlreadyWritten``, which says the copy is done;
2. partitioned (``num_partitions=N``): one Spark job ``repartition(N, *key_cols)`` (Spark's own hash, the very
   expression the partitioned binding uses, so every key lands in the partition the query's rows for it will) and task
   ``p`` writes new partition ``p``'s RocksDB and stages it as a snapshot with a TTL
   (``blobstate.spark.data.executor.tasks.write_task``); the driver checks that every partition answered once, that no
   key arrived twice and every row could be stored (else ``UnwritableRows``, exit 2: the staged blobs are deleted), then
   commits **one** group record of N snapshots (``blobstate.commit.group.GroupCommitter``, the one commit engine: a
   concurrent writer is fenced), recording the partitioning (key columns and their Spark types) as the partitioned
   binding records it (``blobstate.spark.partitioned.driver.partitioning``);
3. a driver store (``num_partitions=None``, task ``0``): the rows stream to the driver (``toLocalIterator``, one
   partition at a time), fill a RocksDB in a scratch directory there, committed as one snapshot record
   (``blobstate.commit.backup.StoreCommitter``: the same engine); it is the store ``register`` restores, which
   lives on the driver anyway.

Which batch: with ``checkpoint_location`` (a query's Spark checkpoint location) the records say the state after the
batch Spark's restart takes as done, with the query's id, so that the query restarted on that location with the new
store (and N, key_cols) passes the alignment check (``blobstate.spark.committed.alignment``) and continues from it; that
is how a query takes over state computed elsewhere, and how ``blobstate spark rescale`` writes. Without it, batch
``batch_id`` (default 0) and ``query_id``: a store to read, restore or audit, which a streaming query adopts only
through a checkpoint location of that query id.

Initial state (``initial_state=True``): the records say the state *before* batch 0 (batch -1,
``blobstate.model.chain.INITIAL_BATCH``) of no query yet, in a lineage of its own: the state a new query starts
from, as Spark's ``flatMapGroupsWithState(initialState=...)`` and Flink's State Processor API bootstrap
(``SavepointWriter``) give one. The first query started on that store with a fresh checkpoint location
(``register``/``partitioned``: no committed batch) restores it before its batch 0 and chains its records onto it;
from its first commit on the store is that query's (``blobstate.spark.committed.alignment``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter, check_partition_count
from blobstate.commit.opening import pin_view
from blobstate.config.options import redact
from blobstate.config.settings import Settings
from blobstate.config.units import parse_duration_ms
from blobstate.errors import ConfigurationError
from blobstate.model.chain import INITIAL_BATCH
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.model.records import SNAPSHOT, Checkpoint, StoreKey
from blobstate.repository.repo import Repository
from blobstate.spark.committed.alignment import spark_done
from blobstate.spark.committed.location import CheckpointLocation
from blobstate.spark.data.executor.tasks import RepositoryRef, WritePlan, Written, entry, fill, write_task
from blobstate.spark.errors import DestinationNotEmpty, StateAlreadyWritten, StateWriteRefused, UnwritableRows
from blobstate.spark.executor.leftovers import scratch_dir, sweep_scratch
from blobstate.spark.executor.rows import OUTPUT_SCHEMA, collect_pickled
from blobstate.worker import StagedSnapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from blobstate.config.units import Duration

log = logging.getLogger(__name__)

#: Spark types of a key or value column that write_state stores (their ``typeName``)
WRITABLE = {"string", "binary", "byte", "short", "integer", "long", "float", "double", "boolean"}


@dataclass(frozen=True)
class Target:
    """Where and what to write: the store ``key`` in ``repo``, ``num_partitions`` (None: a driver store) by
    ``key_cols`` (with their Spark types, ``key_columns``), the state after ``batch_id`` of ``query_id`` (of the run
    ``lineage_id``, when set: an initial state's); the executors' ``local_dir`` (and ``scratch``, the name of the
    directories there), the driver's journal ``work_dir``, the blobs' ``ttl_ms`` and the store's ``retain``."""

    repo: RepositoryRef
    key: StoreKey
    num_partitions: int | None
    key_cols: tuple[str, ...]
    key_columns: tuple[tuple[str, str], ...]
    batch_id: int
    query_id: str
    local_dir: str | None = None
    work_dir: str | None = None
    ttl_ms: int = DEFAULT_TTL_MS
    retain: int = 3
    scratch: str = "blobstate-write"
    lineage_id: str = ""


@dataclass(frozen=True)
class StateWriteResult:
    """A committed write: ``key``'s record ``checkpoint`` holds the state after ``batch_id`` (query ``query_id``) in
    ``num_partitions`` partitions (0: a driver store); ``keys`` keys (``keys_per_partition``), ``bytes_uploaded``,
    ``ms`` for the whole write."""

    key: StoreKey
    batch_id: int
    query_id: str
    num_partitions: int
    keys: int
    keys_per_partition: tuple[int, ...]
    bytes_uploaded: int
    checkpoint: Checkpoint
    ms: float

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.key), "batchId": self.batch_id, "queryId": self.query_id,
                "partitions": self.num_partitions, "keys": self.keys,
                "keysPerPartition": list(self.keys_per_partition), "bytesUploaded": self.bytes_uploaded,
                "checkpoint": self.checkpoint.summary_json(), "durationMs": round(self.ms, 1)}


def rows_frame(df: DataFrame, key_cols: tuple[str, ...], key_col: str = "key", value_col: str = "value") -> Any:
    """``df`` as the columns a write reads: the key columns, then ``key``, ``value``, ``key_raw``, ``value_raw``
    (null binary when ``df`` has none). SQL expressions, not ``pyspark.sql.functions``: those build classic columns
    in a process that also runs a local Connect server. Raises ``ConfigurationError`` naming a missing column or a
    type no store holds."""
    fields = {f.name: f.dataType.typeName() for f in df.schema.fields}
    for name in (*key_cols, key_col, value_col):
        if name not in fields:
            raise ConfigurationError(f"the DataFrame has no column {name!r} (its columns: {sorted(fields)})")
    for name in (key_col, value_col):
        if fields[name] not in WRITABLE:
            raise ConfigurationError(f"column {name!r} is a Spark {fields[name]}: a store holds string, binary, "
                                     "integral, float, double and boolean keys and values; encode it first "
                                     "(to_json, cast)")
    raws = []
    for name, raw in ((key_col, "key_raw"), (value_col, "value_raw")):
        given = f"{name}_raw" if f"{name}_raw" in fields else None
        if given is not None and fields[given] != "binary":
            raise ConfigurationError(f"column {given!r} must be binary (the stored bytes, as read_state gives them)")
        raws.append(f"{_quoted(given)} AS {raw}" if given else f"CAST(NULL AS BINARY) AS {raw}")
    outputs = {"key": key_col, "value": value_col, "key_raw": None, "value_raw": None}
    clash = [c for c in key_cols if c in outputs and outputs[c] != c]
    if clash:
        raise ConfigurationError(f"the key column {clash[0]!r} has the name of a column the write makes from "
                                 f"another one (key_col={key_col!r}, value_col={value_col!r}): rename it")
    extra = [_quoted(c) for c in key_cols if c not in outputs]
    return df.selectExpr(*extra, f"{_quoted(key_col)} AS key", f"{_quoted(value_col)} AS value", *raws)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def check_destination(committer: StoreCommitter, history: list[Checkpoint], target: Target, what: str) -> None:
    """Step 1: the committer's store must hold no record (``history``: its records, the view the committer is pinned
    at). Raises ``StateAlreadyWritten`` when its one record is this very write (its TTLs are removed first, as a new
    host's commit would, whichever work dir that run used), ``DestinationNotEmpty`` otherwise."""
    if not history:
        return
    (first, *rest) = history
    n = target.num_partitions
    same = not rest and first.batch_id == target.batch_id and first.query_id == target.query_id and (
        first.is_group and first.num_partitions == n
        and all(e.kind == SNAPSHOT and e.batch_id == target.batch_id for e in first.partitions)
        if n is not None else first.kind == SNAPSHOT)
    if same:
        committer.take_over()
        shape = f"{n} partitions" if n is not None else "one driver store"
        raise StateAlreadyWritten(f"{target.key} already holds this {what}: batch {target.batch_id} in {shape}, "
                                  f"committed as {first.checkpoint_id} (generation {first.generation}); nothing to "
                                  "do", checkpoint=first)
    raise DestinationNotEmpty(f"the destination {target.key} already holds checkpoints: {what} writes a new store "
                              "into an empty store key only; choose another store")


@contextlib.contextmanager
def destination(target: Target, what: str) -> Iterator[StoreCommitter]:
    """Step 1: the destination's committer, its journal recovered and its store checked empty (``open_destination``);
    held while the block runs; an initial state (``target.lineage_id``) may create the repository, as a new query's
    first batch does. First the scratch directories a killed earlier run left in ``target.local_dir`` on this host are
    swept (``blobstate.spark.executor.leftovers.sweep_scratch``: also when this run then runs no task, or others).
    Raises ``StateAlreadyWritten``, ``DestinationNotEmpty``, ``CommitInProgressError``."""
    sweep_scratch(target.local_dir)  # what a killed earlier run left on this host, whatever its tasks
    repository = target.repo.open(create=bool(target.lineage_id))
    try:
        # Opening the committer recovers a write into the key killed earlier from this work dir: one killed before
        # its append is aborted (its parts deleted), one killed after it is finished (its TTLs removed).
        with StoreCommitter(target.key, repository, store_type="rocksdb", work_dir=target.work_dir,
                            retain=target.retain, ttl_ms=target.ttl_ms) as committer:
            open_destination(committer, target, what)
            yield committer
    finally:
        repository.close()


def open_destination(committer: StoreCommitter, target: Target, what: str) -> None:
    """Step 1 on an open ``committer`` of the destination (its journal recovered when it opened), through the Open
    door: its view read once and its generation pinned from it (``blobstate.commit.opening.pin_view``: a later append
    by another writer fences this one), then that view checked empty (``check_destination``). Spark-free: the
    deterministic simulator's rescale runs it too. Raises ``StateAlreadyWritten``, ``DestinationNotEmpty``."""
    check_destination(committer, list(pin_view(committer).history), target, what)


def commit_rows(committer: StoreCommitter, rows: Any, target: Target, *, what: str = "state write",
                expect_keys: int | None = None) -> StateWriteResult:
    """Steps 2-3 of the module docstring for ``rows`` (``rows_frame``) into ``destination``'s committer;
    ``expect_keys``: the number of keys the write must hold (a copy's check). Raises ``UnwritableRows``,
    ``StateWriteRefused`` (exit 2), ``FencedError``, ``StorageError``, the tasks' errors."""
    t0 = time.perf_counter()
    if target.lineage_id:  # an initial state's own run (``blobstate.spark.committed.alignment``), at the commit point
        committer.commit_point.fields["lineage_id"] = target.lineage_id
    if target.num_partitions is None:
        checkpoint, keys, uploaded = _write_driver_store(committer, rows, target, what, expect_keys)
        per_partition: tuple[int, ...] = (keys,)
    else:
        plan = WritePlan(target.repo, target.key, target.batch_id, target.ttl_ms, target.local_dir, target.scratch)
        written = collect_pickled(rows.repartition(target.num_partitions, *target.key_cols)
                                  .select("key", "value", "key_raw", "value_raw")
                                  .mapInArrow(functools.partial(write_task, plan), OUTPUT_SCHEMA))
        checkpoint, per_partition, uploaded = commit_written(committer, written, target, what=what,
                                                             expect_keys=expect_keys)
        keys = sum(per_partition)
    log.info("wrote %s (%s) at batch %s: %s keys", target.key, what, target.batch_id, keys)
    return StateWriteResult(target.key, target.batch_id, target.query_id, target.num_partitions or 0, keys,
                            per_partition, uploaded, checkpoint, (time.perf_counter() - t0) * 1000)


def commit_written(committer: StoreCommitter, written: list[Written], target: Target, *, what: str,
                   expect_keys: int | None = None) -> tuple[Checkpoint, tuple[int, ...], int]:
    """The end of step 2, Spark-free (the deterministic simulator's rescale runs it too): the write tasks' answers
    ``written`` checked (every partition once, no problem, ``expect_keys`` keys; else the staged blobs are
    deleted and ``UnwritableRows``/``StateWriteRefused`` raised), then **one** group record of their snapshots
    committed with the partitioning (``target.key_columns``, carried at the commit point:
    ``CommitPoint.fields``). Returns ``(record, keys per partition, bytes uploaded)``. Raises ``FencedError``,
    ``StorageError``."""
    assert target.num_partitions is not None
    staged = _check(committer.repo, written, target, what, expect_keys)
    committer.commit_point.fields["key_columns"] = target.key_columns
    checkpoint = GroupCommitter(committer, num_partitions=target.num_partitions).commit(
        [s.entry for s in staged], batch_id=target.batch_id, query_id=target.query_id,
        created_ms=min(w.created_ms for w in written), new_blob_ids=[b for s in staged for b in s.new_blob_ids])
    per_partition = tuple(w.keys for w in sorted(written, key=lambda w: w.partition))
    return checkpoint, per_partition, sum(s.bytes_uploaded for s in staged)


def _refuse(target: Target, what: str, problems: list[str], duplicates: bool) -> UnwritableRows:
    return UnwritableRows(f"{what} into {target.key} refused, nothing committed: {'; '.join(problems[:10])}",
                          problems=problems, duplicates=duplicates)


def _write_driver_store(committer: StoreCommitter, rows: Any, target: Target, what: str,
                        expect_keys: int | None) -> tuple[Checkpoint, int, int]:
    """Step 3: the rows into a RocksDB on the driver, committed as one snapshot record."""
    from rocksdict import Rdict

    with scratch_dir(target.local_dir, f"{target.scratch}-driver-") as base:  # held: swept if this process dies
        db = Rdict(f"{base}/db")
        try:
            local = (entry(r["key"], r["value"], r["key_raw"], r["value_raw"]) for r in
                     rows.select("key", "value", "key_raw", "value_raw").toLocalIterator(prefetchPartitions=True))
            keys, problems, duplicates = fill(db, local)
            if not problems and expect_keys is not None and keys != expect_keys:
                problems = [f"{expect_keys} keys were read but {keys} written"]
            if problems:
                raise _refuse(target, what, problems, duplicates)
            db.flush(True)
            checkpoint = committer.checkpoint(db, batch_id=target.batch_id, query_id=target.query_id)
        finally:
            db.close()
        result = committer.upload(checkpoint)
    return result.checkpoint, keys, result.bytes_uploaded


def _check(repository: Repository, written: list[Written], target: Target, what: str,
           expect_keys: int | None) -> list[StagedSnapshot]:
    """Step 2's checks; on a failure the staged blobs are deleted (best effort: else their TTL expires) and
    ``UnwritableRows`` (or ``StateWriteRefused``) raised."""
    n = target.num_partitions
    parts = sorted(w.partition for w in written)
    staged = [w.staged for w in written if w.staged is not None]
    problems = [p for w in written for p in w.problems]
    refusal: StateWriteRefused | None = None
    if n is not None and parts != list(range(n)):
        refusal = StateWriteRefused(f"{what} into {target.key} refused, nothing committed: the write job answered "
                                    f"for partitions {parts[:20]}, not 0..{n - 1}")
    elif problems:
        refusal = _refuse(target, what, problems, any(w.duplicates for w in written))
    elif expect_keys is not None and sum(w.keys for w in written) != expect_keys:
        refusal = _refuse(target, what, [f"{expect_keys} keys were read but {sum(w.keys for w in written)} "
                                         "written"], False)
    if refusal is None:
        return sorted(staged, key=lambda s: s.entry.partition)
    ids = [i for s in staged for i in (s.entry.blob_id, *s.new_blob_ids)]
    try:
        repository.store.delete_many(ids)
    except Exception as exc:  # noqa: BLE001 - the refusal matters more; the blobs expire by their TTL
        log.warning("could not delete the %s staged blobs of %s (they expire by their TTL): %s", len(ids),
                    target.key, redact(str(exc)))
    raise refusal


def write_state(df: DataFrame, *, repo: str, job: str, store: str, num_partitions: int | None = None,
                key_cols: list[str] | None = None, task: str | None = None, key_col: str = "key",
                value_col: str = "value", checkpoint_location: str | None = None, batch_id: int | None = None,
                query_id: str = "", initial_state: bool = False, log: str | None = None,
                storage_options: dict[str, Any] | None = None, log_options: dict[str, Any] | None = None,
                local_dir: str | None = None, work_dir: str | None = None, ttl: Duration = DEFAULT_TTL_MS,
                retain: int = 3, settings: Settings | None = None) -> StateWriteResult:
    """Write ``df``'s ``key_col``/``value_col`` rows as the new store ``(job, task, store)`` (the module docstring):
    a partitioned store of ``num_partitions`` partitions by ``key_cols`` (task ``group``), or a driver store
    (``num_partitions`` None, task ``0``). Returns what was committed. Example::

        routes = spark.read.parquet("/exports/routes")          # origin, dest, key, value
        blobstate.spark.write_state(routes, repo="s3://bucket/state", job="flights", store="routes-v2",
                                    num_partitions=8, key_cols=["origin", "dest"], checkpoint_location="/ck/flights")
        # then restart the query on /ck/flights with store="routes-v2", num_partitions=8

    ``checkpoint_location``: the query that continues from this state (the batch and query id are its); else
    ``batch_id`` (default 0) and ``query_id``. ``initial_state``: the state a *new* query starts from, before its
    batch 0 (with neither of those: the module docstring; Spark's ``flatMapGroupsWithState(initialState=...)``,
    Flink's State Processor API bootstrap)::

        blobstate.spark.write_state(batch_result, repo=repo, job="flights", store="routes", num_partitions=4,
                                    key_cols=["origin", "dest"], initial_state=True)
        ps = blobstate.spark.partitioned(spark, repo=repo, checkpoint_location="/ck/new", job="flights",
                                         store="routes", num_partitions=4, key_cols=["origin", "dest"], ...)

    ``work_dir``: the driver's journal of the new store (default under
    ``BLOBSTATE_WORK_DIR``); ``local_dir``: scratch space (executors, and the driver for a driver store); ``ttl``:
    the blobs' TTL until the commit; ``retain``: the new store's retention; ``settings``: what the driver runs with
    (default: the environment's), sent to the tasks. Raises ``StateWriteRefused``,
    ``DestinationNotEmpty``, ``StateAlreadyWritten``, ``UnwritableRows`` (exit 2, nothing committed),
    ``ConfigurationError`` (a bad column or option), ``FencedError``, ``StorageError``, ``RepositoryNotFound``.
    """
    if initial_state and (checkpoint_location is not None or batch_id is not None or query_id):
        raise ConfigurationError("initial_state=True writes the state before a new query's batch 0, of no query "
                                 "yet: pass no checkpoint_location, batch_id or query_id with it")
    if num_partitions is None:
        if key_cols:
            raise ConfigurationError("key_cols partition a partitioned store: pass num_partitions=N with them, or "
                                     "neither for a driver store")
    else:
        check_partition_count([], num_partitions, "")
        if not key_cols:
            raise ConfigurationError("a partitioned store needs key_cols: the columns Spark's hash partitions by")
    cols = tuple(key_cols or ())
    rows = rows_frame(df, cols, key_col, value_col)
    key = StoreKey(job, task or ("0" if num_partitions is None else "group"), store)
    batch, query = (INITIAL_BATCH, "") if initial_state else _batch_of(df, checkpoint_location, batch_id, query_id)
    target = Target(RepositoryRef(repo, log, storage_options, log_options, Settings.for_call(settings)), key,
                    num_partitions, cols,
                    tuple((c, df.schema[c].dataType.simpleString()) for c in cols), batch, query, local_dir,
                    work_dir, parse_duration_ms(ttl), retain, lineage_id=uuid.uuid4().hex if initial_state else "")
    with destination(target, "state write") as committer:
        return commit_rows(committer, rows, target)


def _batch_of(df: DataFrame, location: str | None, batch_id: int | None, query_id: str) -> tuple[int, str]:
    """``(batch, query id)`` the records carry: the batch a restart on ``location`` takes as done and its query
    id, else ``batch_id`` (default 0) and ``query_id``. Raises ``StateWriteRefused``."""
    if location is None:
        return (0 if batch_id is None else batch_id), query_id
    spark_location = CheckpointLocation(df.sparkSession, location)
    done = spark_done(spark_location.last_committed(), spark_location.last_planned())
    if done is None:
        raise StateWriteRefused(f"Spark committed no batch in {location}: a query with no committed batch starts "
                                "from the empty state; write the state once the query ran (stopped), or pass "
                                "batch_id= for a store to read")
    if batch_id is not None and batch_id != done:
        raise StateWriteRefused(f"a restart on {location} continues after batch {done}, so that is the batch the "
                                f"state is written for (not {batch_id})")
    return done, spark_location.query_id() or ""


__all__ = ["DestinationNotEmpty", "StateAlreadyWritten", "StateWriteRefused", "StateWriteResult", "Target",
           "UnwritableRows", "commit_rows", "commit_written", "destination", "open_destination", "rows_frame",
           "write_state"]
