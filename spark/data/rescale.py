"""Offline re-partitioning of a committed group: the state of N partitions into a new group of M, by Spark's hash.

A partitioned store (``blobstate.spark.partitioned``) cannot change N in place: Spark's hash partitioning
(``pmod(murmur3(key_cols), N)``) would send keys to partitions whose state does not hold them, so opening a group
with another N is refused (``PartitionCountError``). ``rescale(spark, repo=..., job=..., store=..., to_store=...,
num_partitions=M, key_schema=..., key_of=...)`` moves the state instead, with the query stopped:

1. the source group's state after one batch ``B`` is chosen: Spark's last committed batch when ``checkpoint_location``
   is given (the query id and every partition's chain checked by ``blobstate.spark.committed.alignment``, exactly what a
   restart would restore), else ``batch_id``, else the newest group record's batch (which may be one Spark re-runs: the
   rescale says so); each old partition's chain ending exactly at it (``blobstate.model.align``, the Align door) is
   planned on the driver;
2. the destination ``(job, task, to_store)`` must hold no record (``RescaleRefused``, exit 2, nothing written),
   once its journal in ``work_dir`` is recovered (``blobstate.spark.data.write.destination``): a rescale killed
   before its group append is aborted there (its parts deleted) and this run starts afresh; one killed after it is
   finished (its TTLs removed) and this run is refused with ``RescaleAlreadyCommitted``, which says the copy is
   done;
3. the source's state is ``read_state``'s DataFrame (``blobstate.spark.data.read``: one task per old partition restores
   its chain and streams its entries out) and every key is mapped to its key columns
   (``blobstate.spark.data.executor.keys.map_keys``: ``key_of``, checked against ``key_schema``); the rows are
   persisted, and a key ``key_of`` cannot map is refused before anything is uploaded (``UnmappableKeyError``);
4. the rows go to ``write_state``'s job (``blobstate.spark.data.write.commit_rows``): ``repartition(M,
   *key_cols)`` (the very expression the partitioned query uses, so every key lands where the restarted query's
   rows will) and task ``p`` writes new partition ``p``'s RocksDB and stages it as a snapshot of batch ``B``;
5. the driver checks that every new partition answered once, that no key arrived twice, and that as many keys were
   written as read, then commits **one** group record of M snapshot entries carrying ``B``, the source record's
   query id and the key columns with their Spark types (``blobstate.commit.group.GroupCommitter``: the single
   commit point; a concurrent writer is fenced).

Scratch space: each task restores (or fills) its RocksDB copy in a held directory of ``local_dir``
(``blobstate.spark.executor.leftovers.scratch_dir``, removed at its end); what a killed rescale left there is swept by
the next run on that host (its driver at step 2, each of its tasks as it starts), whatever partitions it runs.

Rescale is ``read_state`` then ``write_state``, one implementation: every type a key or value may have goes through
the DataFrame exactly (a value of another type than its column rides in the raw columns).

The query then restarts on the same Spark checkpoint location with ``store=to_store, num_partitions=M`` and passes
the alignment check: the state after ``B`` is the new snapshots. The source group is never changed (a rollback is
a restart with the old store and N) and the destination's history never mixes two N. Spark's own state store
cannot repartition at all (its operators' state is bound to ``spark.sql.shuffle.partitions`` for a checkpoint's
life); Flink rescales keyed state by key groups on restore. Here the offline copy takes the place of both.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import check_partition_count
from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError, NothingToRestore
from blobstate.model.align import UNCONFIRMED, chain_to, spark_done
from blobstate.model.chain import Chain, partition_history
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.view import read_view
from blobstate.restoring.state import key_groups_of
from blobstate.spark.committed.alignment import plan_alignment
from blobstate.spark.committed.location import CheckpointLocation, is_connect
from blobstate.spark.data.executor.keys import ERROR, KeyOf, KeyPlan, map_keys
from blobstate.spark.data.executor.tasks import ReadPlan, RepositoryRef
from blobstate.spark.data.read import infer_types, read_frame, state_schema
from blobstate.spark.data.write import StateWriteResult, Target, commit_rows, destination
from blobstate.spark.errors import (
    RescaleAlreadyCommitted,
    RescaleRefused,
    StateAlreadyWritten,
    StateWriteRefused,
    UnmappableKeyError,
    UnwritableRows,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RescaleResult:
    """A committed rescale: ``source``'s state (``from_partitions`` partitions) is the new store ``written``
    describes (``StateWriteResult``: its key, batch, query id, partitions, keys, bytes, group record); ``ms`` for
    the whole rescale. ``target``, ``batch_id``, ``query_id``, ``to_partitions``, ``keys``,
    ``keys_per_partition``, ``bytes_uploaded`` and ``checkpoint`` are ``written``'s."""

    source: StoreKey
    from_partitions: int
    written: StateWriteResult
    ms: float
    confirmed: bool = False  # the batch is one Spark's checkpoint location says it committed

    target = property(lambda self: self.written.key)
    batch_id = property(lambda self: self.written.batch_id)
    query_id = property(lambda self: self.written.query_id)
    to_partitions = property(lambda self: self.written.num_partitions)
    keys = property(lambda self: self.written.keys)
    keys_per_partition = property(lambda self: self.written.keys_per_partition)
    bytes_uploaded = property(lambda self: self.written.bytes_uploaded)
    checkpoint = property(lambda self: self.written.checkpoint)

    def to_json(self) -> dict[str, Any]:
        doc = self.written.to_json()
        return {"source": str(self.source), "target": doc.pop("store"), "fromPartitions": self.from_partitions,
                "toPartitions": doc.pop("partitions"), **doc, "confirmed": self.confirmed,
                "durationMs": round(self.ms, 1)}


def key_fields(spark: SparkSession, key_schema: str, key_cols: list[str] | None) -> tuple[Any, list[str]]:
    """``(StructType, key column names)`` of the DDL ``key_schema`` (parsed by Spark); ``key_cols``, when given,
    must name its columns in its order (Spark's hash depends on both). Raises ``RescaleRefused``."""
    try:
        schema = spark.createDataFrame([], key_schema).schema
    except Exception as exc:  # noqa: BLE001 - Spark's parse errors are Java exceptions
        raise RescaleRefused(f"key_schema {key_schema!r} is not a Spark DDL schema such as 'origin string, "
                             f"dest string': {str(exc).splitlines()[0][:300]}") from None
    names = [f.name for f in schema.fields]
    if key_cols is not None and list(key_cols) != names:
        raise RescaleRefused(f"key_cols {list(key_cols)} must be the columns of key_schema in its order {names}: "
                             "Spark's hash of the key columns depends on their order and types")
    if not names:
        raise RescaleRefused("key_schema names no column")
    return schema, names


def source_state(spark: SparkSession, history: list[Checkpoint], source: StoreKey, *, batch_id: int | None,
                 checkpoint_location: str | None, repo_url: str) -> tuple[Checkpoint, dict[int, Chain]]:
    """Step 1: the group record whose batch is rescaled (the newest of that batch) and each old partition's chain
    up to it. Raises ``NothingToRestore``/``BrokenChainError`` (exit 5), ``SparkAlignmentError``,
    ``RescaleRefused``."""
    if checkpoint_location is None:
        return source_chains(history, source, batch_id=batch_id)
    groups, n = _groups(history, source)
    location = CheckpointLocation(spark, checkpoint_location)
    committed, query_id = spark_done(location.last_committed(), location.last_planned()), location.query_id()
    if committed is None or (batch_id is not None and batch_id != committed):
        raise RescaleRefused(f"Spark committed batch {committed} in {checkpoint_location}: a restart on it "
                             f"continues from there, so that is the batch to rescale (not {batch_id})")
    chains = {}
    for p in range(n):
        plan = plan_alignment(partition_history(history, p), source, last_committed=committed,
                              query_id=query_id, location=checkpoint_location, repo_url=repo_url)
        assert plan.chain is not None
        chains[p] = plan.chain
    return _record(groups, committed, source), chains


def source_chains(history: list[Checkpoint], source: StoreKey, *,
                  batch_id: int | None) -> tuple[Checkpoint, dict[int, Chain]]:
    """Step 1 without a Spark checkpoint location (pure; the deterministic simulator's rescale runs it): the group
    record of ``batch_id`` (default: the newest group record's batch, which may be one Spark re-runs: the caller
    says so, ``blobstate.model.align.UNCONFIRMED``) and each old partition's chain ending exactly at it (the Align
    door). Raises ``NothingToRestore``/``BrokenChainError``/``StateNotHeld`` (exit 5), ``RescaleRefused``."""
    groups, n = _groups(history, source)
    batch = batch_id if batch_id is not None else groups[-1].batch_id
    assert batch is not None
    chains = {p: chain_to(partition_history(history, p), batch, f"{source} partition {p}") for p in range(n)}
    return _record(groups, batch, source), chains


def _groups(history: list[Checkpoint], source: StoreKey) -> tuple[list[Checkpoint], int]:
    """The group records of ``history`` and their one partition count."""
    groups = [cp for cp in history if cp.is_group]
    if not groups:
        raise NothingToRestore(f"{source} holds no group checkpoint: nothing to re-partition")
    counts = sorted({cp.num_partitions for cp in groups})
    if len(counts) != 1:
        raise RescaleRefused(f"{source} holds group checkpoints of {counts} partitions; rescale needs one count")
    return groups, counts[0]


def _record(groups: list[Checkpoint], batch: int, source: StoreKey) -> Checkpoint:
    """The newest group record of ``batch``."""
    record = max((cp for cp in groups if cp.batch_id == batch), key=lambda cp: cp.generation, default=None)
    if record is None:
        raise NothingToRestore(f"{source} holds no group record of batch {batch} (its group records cover batches "
                               f"{sorted({cp.batch_id for cp in groups})[-10:]})")
    return record


def rescale(spark: SparkSession, *, repo: str, job: str, store: str, to_store: str, num_partitions: int,
            key_schema: str, key_of: KeyOf, key_cols: list[str] | None = None, task: str = "group",
            batch_id: int | None = None, checkpoint_location: str | None = None, log_url: str | None = None,
            storage_options: dict[str, Any] | None = None, log_options: dict[str, Any] | None = None,
            local_dir: str | None = None, work_dir: str | None = None, ttl_ms: int = DEFAULT_TTL_MS,
            retain: int = 3, settings: Settings | None = None) -> RescaleResult:
    """Re-partition the committed group ``(job, task, store)`` into a new group ``(job, task, to_store)`` of
    ``num_partitions`` partitions (the module docstring's steps), with the streaming query stopped.

    ``key_schema``: the key columns as a Spark DDL string (``"origin string, dest string"``: Spark's hash depends
    on their types), in the order of the query's ``key_cols`` (``key_cols`` may repeat them, as a check);
    ``key_of(stored_key) -> tuple``: a stored key's key-column values (runs on the executors: a module-level
    function); ``checkpoint_location``: the query's Spark checkpoint location (rescale the state Spark committed
    last; recommended), else ``batch_id`` (default: the newest group record's batch); ``local_dir``: the
    executors' scratch directory (default: their temporary directory); ``work_dir``: the driver's journal of the
    new store; ``log_url``, ``storage_options``, ``log_options``: as for ``blobstate.api``; ``ttl_ms``: the
    blobs' TTL until the group commits (the commit aborts when the rescale outlives half of it);
    ``retain``: the new store's retention; ``settings``: what the driver runs with (default: the environment's), sent
    to the tasks. Example::

        blobstate.spark.rescale(spark, repo="s3://bucket/state", job="flights", store="routes",
                                to_store="routes-m8", num_partitions=8, key_schema="origin string, dest string",
                                key_of=route_of, checkpoint_location="/ck/flights")

    Raises ``RescaleRefused`` / ``UnmappableKeyError`` (exit 2, nothing committed), ``NothingToRestore`` and
    ``BrokenChainError`` (exit 5), ``SparkAlignmentError``, ``IntegrityError`` from the restores, ``FencedError``
    (another writer appended to the destination meanwhile), ``StorageError``, ``ConfigurationError``.
    """
    t0 = time.perf_counter()
    if is_connect(spark):
        raise ConfigurationError("rescale needs classic PySpark (the driver commits the group)")
    check_partition_count([], num_partitions, "")
    if to_store == store:
        raise RescaleRefused("to_store must differ from store: the source group is kept as it is (rollback)")
    schema, cols = key_fields(spark, key_schema, key_cols)
    source, target_key = StoreKey(job, task, store), StoreKey(job, task, to_store)
    ref = RepositoryRef(repo, log_url, storage_options, log_options, Settings.for_call(settings))
    with ref.open() as repository:
        history = list(read_view(repository, source).history)  # read once: the chains and the types from one view
        record, chains = source_state(spark, history, source, batch_id=batch_id,
                                      checkpoint_location=checkpoint_location, repo_url=repo)
        types = infer_types(repository, history)
    confirmed = checkpoint_location is not None
    if not confirmed and batch_id is None and record.query_id:
        log.warning("rescale of %s at batch %s: %s", source, record.batch_id, UNCONFIRMED)
    assert record.batch_id is not None
    target = Target(ref, target_key, num_partitions, tuple(cols),
                    tuple((f.name, f.dataType.simpleString()) for f in schema.fields), record.batch_id,
                    record.query_id, local_dir, work_dir, ttl_ms, retain, scratch="blobstate-rescale-write")
    try:
        with destination(target, "rescale") as committer:  # step 2, before any Spark job
            result = _copy(spark, committer, target, ReadPlan(ref, source, tuple(sorted(chains.items())), *types,
                                                              local_dir=local_dir, scratch="blobstate-rescale-read",
                                                              key_groups=key_groups_of(history)),
                           schema, key_of)
    except StateAlreadyWritten as exc:
        raise RescaleAlreadyCommitted(f"{str(exc).replace('this rescale', f'this rescale of {source}')}: restart "
                                      f"the query with store={to_store!r} and num_partitions={num_partitions}"
                                      ) from None
    except UnwritableRows as exc:
        if exc.duplicates:
            raise RescaleRefused(
                f"rescale into {target_key} refused, nothing committed: keys held by two old partitions "
                f"({'; '.join(exc.problems[:5])}): the source's update wrote keys that its rows' key columns do not "
                "determine, so no partitioning can hold them") from None
        raise RescaleRefused(str(exc)) from None
    except StateWriteRefused as exc:
        raise RescaleRefused(str(exc)) from None
    log.info("rescaled %s (%s partitions) to %s (%s partitions) at batch %s: %s keys", source, len(chains),
             target_key, num_partitions, record.batch_id, result.keys)
    return RescaleResult(source, len(chains), result, (time.perf_counter() - t0) * 1000, confirmed)


def _copy(spark: SparkSession, committer: StoreCommitter, target: Target, read: ReadPlan, schema: Any,
          key_of: KeyOf) -> StateWriteResult:
    """Steps 3-5: the source's state (``read_state``'s job), its keys mapped to key columns (persisted, checked:
    nothing is uploaded while a key cannot be mapped), then ``write_state``'s job and commit."""
    from pyspark import StorageLevel
    from pyspark.sql.pandas.types import to_arrow_type

    fields = tuple((f.name, f.dataType.typeName(), f.nullable) for f in schema.fields)
    plan = KeyPlan(key_of, fields, tuple(to_arrow_type(f.dataType) for f in schema.fields))
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
    state = read_frame(spark, read, state_schema(read.key_type, read.value_type))
    rows = state.mapInArrow(functools.partial(map_keys, plan), f"{columns}, key {read.key_type}, value "
                            f"{read.value_type}, key_raw binary, value_raw binary, {ERROR} string")
    rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        total = rows.count()
        bad = [r[0] for r in rows.where(f"{ERROR} IS NOT NULL").select(ERROR).limit(5).collect()]
        if bad:
            raise UnmappableKeyError(f"key_of cannot map {'every' if len(bad) < 5 else 'at least 5'} of these "
                                     f"stored keys of {read.key}; nothing was written: {'; '.join(bad)}")
        return commit_rows(committer, rows.drop(ERROR), target, what="rescale", expect_keys=total)
    finally:
        rows.unpersist()


__all__ = ["RescaleAlreadyCommitted", "RescaleRefused", "RescaleResult", "UnmappableKeyError", "key_fields",
           "rescale", "source_chains", "source_state"]
