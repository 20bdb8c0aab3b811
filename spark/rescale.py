"""Offline re-partitioning of a committed group: the state of N partitions into a new group of M, by Spark's hash.

A partitioned store (``blobstate.spark.partitioned``) cannot change N in place: Spark's hash partitioning
(``pmod(murmur3(key_cols), N)``) would send keys to partitions whose state does not hold them, so opening a group
with another N is refused (``PartitionCountError``). ``rescale(spark, repo=..., job=..., store=..., to_store=...,
num_partitions=M, key_schema=..., key_of=...)`` moves the state instead, with the query stopped:

1. the source group's state after one batch ``B`` is chosen: Spark's last committed batch when
   ``checkpoint_location`` is given (the query id and every partition's chain checked by
   ``blobstate.spark.alignment``, exactly what a restart would restore), else ``batch_id``, else the newest group
   record's batch; each old partition's chain (``blobstate.model.chain.plan_chain``) is planned on the driver;
2. the destination ``(job, task, to_store)`` must hold no record (``RescaleRefused``, exit 2, nothing written),
   once its journal in ``work_dir`` is recovered: a rescale killed before its group append is aborted there (its
   parts deleted) and this run starts afresh; one killed after it is finished (its TTLs removed) and this run is
   refused with ``RescaleAlreadyCommitted``, which says the copy is done;
3. Spark job 1 (``blobstate.spark.rescale_task.read_partitions``): one task per old partition restores its chain
   and turns every key into a row of its key columns (``key_of``, checked against ``key_schema``); the rows are
   persisted, and a key ``key_of`` cannot map is refused before anything is uploaded (``UnmappableKeyError``);
4. Spark job 2 (``write_partition``): the rows, as a DataFrame of ``key_schema``, are ``repartition(M, *key_cols)``
   ed (the very expression the partitioned query uses, so every key lands where the restarted query's rows will)
   and task ``p`` writes new partition ``p``'s RocksDB and stages it as a snapshot of batch ``B`` with a TTL;
5. the driver checks that every new partition answered once, that no key arrived twice, and that as many keys were
   written as read, then commits **one** group record of M snapshot entries carrying ``B`` and the source record's
   query id (``blobstate.commit.group.GroupCommitter``: the single commit point; a concurrent writer is fenced).

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
from blobstate.commit.group import GroupCommitter, StagedSnapshot, check_partition_count
from blobstate.errors import ConfigurationError, NothingToRestore
from blobstate.model.chain import Chain, partition_history, plan_chain
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.model.records import SNAPSHOT, Checkpoint, StoreKey
from blobstate.repository.options import redact
from blobstate.repository.repo import Repository
from blobstate.spark.alignment import plan_alignment
from blobstate.spark.location import CheckpointLocation, is_connect
from blobstate.spark.rescale_task import (
    KeyOf,
    ReadPlan,
    RepositoryRef,
    WritePlan,
    Written,
    is_error,
    read_partitions,
    write_partition,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class RescaleRefused(ConfigurationError):
    """A rescale that cannot be done as asked (exit 2): the destination holds records, a bad key schema, a source
    of mixed partition counts, keys held by two partitions. Nothing is committed; what was uploaded is deleted
    (or expires by its TTL)."""


class UnmappableKeyError(RescaleRefused):
    """``key_of`` cannot map a stored key to key-column values (it raised, or returned the wrong number or types of
    values); the message names the key. Nothing is uploaded."""


class RescaleAlreadyCommitted(RescaleRefused):
    """The destination already holds exactly this rescale (the same source batch and query id, the same number of
    partitions, snapshots only): an earlier run committed it, then was killed or lost its answer. Nothing is done;
    the query can restart on the destination (exit 2, like any refusal, so a script that expected a fresh copy
    notices)."""


@dataclass(frozen=True)
class RescaleResult:
    """A committed rescale: ``source``'s state after ``batch_id`` (query ``query_id``, ``from_partitions``
    partitions) is ``target``'s group record ``checkpoint`` of ``to_partitions`` snapshots; ``keys`` keys
    (``keys_per_partition``), ``bytes_uploaded``, ``ms`` for the whole rescale."""

    source: StoreKey
    target: StoreKey
    batch_id: int
    query_id: str
    from_partitions: int
    to_partitions: int
    keys: int
    keys_per_partition: tuple[int, ...]
    bytes_uploaded: int
    checkpoint: Checkpoint
    ms: float

    def to_json(self) -> dict[str, Any]:
        return {"source": str(self.source), "target": str(self.target), "batchId": self.batch_id,
                "queryId": self.query_id, "fromPartitions": self.from_partitions,
                "toPartitions": self.to_partitions, "keys": self.keys,
                "keysPerPartition": list(self.keys_per_partition), "bytesUploaded": self.bytes_uploaded,
                "checkpoint": self.checkpoint.summary_json(), "durationMs": round(self.ms, 1)}


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
    groups = [cp for cp in history if cp.is_group]
    if not groups:
        raise NothingToRestore(f"{source} holds no group checkpoint: nothing to re-partition")
    counts = sorted({cp.num_partitions for cp in groups})
    if len(counts) != 1:
        raise RescaleRefused(f"{source} holds group checkpoints of {counts} partitions; rescale needs one count")
    n = counts[0]
    if checkpoint_location is not None:
        location = CheckpointLocation(spark, checkpoint_location)
        committed, query_id = location.last_committed(), location.query_id()
        if committed is None or (batch_id is not None and batch_id != committed):
            raise RescaleRefused(f"Spark committed batch {committed} in {checkpoint_location}: a restart on it "
                                 f"continues from there, so that is the batch to rescale (not {batch_id})")
        chains = {}
        for p in range(n):
            plan = plan_alignment(partition_history(history, p), source, last_committed=committed,
                                  query_id=query_id, location=checkpoint_location, repo_url=repo_url)
            assert plan.chain is not None
            chains[p] = plan.chain
        batch = committed
    else:
        batch = batch_id if batch_id is not None else groups[-1].batch_id
        assert batch is not None
        chains = {p: plan_chain(partition_history(history, p), batch) for p in range(n)}
    record = max((cp for cp in groups if cp.batch_id == batch), key=lambda cp: cp.generation, default=None)
    if record is None:
        raise NothingToRestore(f"{source} holds no group record of batch {batch} (its group records cover batches "
                               f"{sorted({cp.batch_id for cp in groups})[-10:]})")
    return record, chains


def rescale(spark: SparkSession, *, repo: str, job: str, store: str, to_store: str, num_partitions: int,
            key_schema: str, key_of: KeyOf, key_cols: list[str] | None = None, task: str = "group",
            batch_id: int | None = None, checkpoint_location: str | None = None, log_url: str | None = None,
            storage_options: dict[str, Any] | None = None, log_options: dict[str, Any] | None = None,
            local_dir: str | None = None, work_dir: str | None = None, ttl_ms: int = DEFAULT_TTL_MS,
            retain: int = 3) -> RescaleResult:
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
    ``retain``: the new store's retention. Example::

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
    source, target = StoreKey(job, task, store), StoreKey(job, task, to_store)
    ref = RepositoryRef(repo, log_url, storage_options, log_options)
    repository = ref.open()
    try:
        record, chains = source_state(spark, repository.log.history(source), source, batch_id=batch_id,
                                      checkpoint_location=checkpoint_location, repo_url=repo)
        if work_dir is None:
            from blobstate.local import workdir
            from blobstate.repository.backends import normalize_url

            work_dir = workdir.store_work_dir(normalize_url(repo), target)
        assert record.batch_id is not None
        fields = tuple((f.name, f.dataType.typeName(), f.nullable) for f in schema.fields)
        # Opening the committer recovers a rescale into ``target`` killed earlier from this work dir: one killed
        # before its append is aborted (its parts deleted), one killed after it is finished (its TTLs removed).
        with StoreCommitter(target, repository, store_type="rocksdb", work_dir=work_dir, retain=retain,
                            ttl_ms=ttl_ms) as committer:
            _check_destination(committer, source, record, num_partitions)
            groups = GroupCommitter(committer, num_partitions=num_partitions)
            committer.commit_point.generation()  # the destination's generation now: a later append fences us
            read = ReadPlan(ref, source, chains, key_of, fields, local_dir)
            write = WritePlan(ref, target, record.batch_id, ttl_ms, local_dir)
            written, total = _run_jobs(spark, read, write, schema, cols, num_partitions)
            staged = _check(repository, written, total, num_partitions, target)
            checkpoint = groups.commit([s.entry for s in staged], batch_id=record.batch_id,
                                       query_id=record.query_id, created_ms=min(w.created_ms for w in written),
                                       new_blob_ids=[b for s in staged for b in s.new_blob_ids])
    finally:
        repository.close()
    result = RescaleResult(source, target, record.batch_id, record.query_id, len(chains), num_partitions, total,
                           tuple(w.keys for w in sorted(written, key=lambda w: w.partition)),
                           sum(s.bytes_uploaded for s in staged), checkpoint, (time.perf_counter() - t0) * 1000)
    log.info("rescaled %s (%s partitions) to %s (%s partitions) at batch %s: %s keys", source, len(chains),
             target, num_partitions, record.batch_id, total)
    return result


def _check_destination(committer: StoreCommitter, source: StoreKey, record: Checkpoint,
                       num_partitions: int) -> None:
    """Step 2: the committer's store must hold no record. Raises ``RescaleAlreadyCommitted`` when its one record is
    this very rescale (an earlier run that committed, then died or lost its answer: its TTLs are removed first, as
    a new host's commit would, whichever work dir that run used), ``RescaleRefused`` otherwise."""
    target, history = committer.key, committer.repo.log.history(committer.key)
    if not history:
        return
    (first, *rest) = history
    if (not rest and first.is_group and first.num_partitions == num_partitions
            and first.batch_id == record.batch_id and first.query_id == record.query_id
            and all(e.kind == SNAPSHOT and e.batch_id == record.batch_id for e in first.partitions)):
        committer.take_over()
        raise RescaleAlreadyCommitted(
            f"{target} already holds this rescale of {source}: batch {record.batch_id} in {num_partitions} "
            f"partitions, committed as {first.checkpoint_id} (generation {first.generation}); nothing to do: "
            f"restart the query with store={target.store!r} and num_partitions={num_partitions}")
    raise RescaleRefused(f"the destination {target} already holds checkpoints: rescale writes a new group "
                         "into an empty store key only; choose another to_store")


def _run_jobs(spark: SparkSession, read: ReadPlan, write: WritePlan, schema: Any, cols: list[str],
              num_partitions: int) -> tuple[list[Written], int]:
    """Steps 3-4: job 1's rows (persisted, checked), then job 2's answers; returns them and the keys read."""
    from pyspark import StorageLevel
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    old = len(read.chains)
    rows = spark.sparkContext.parallelize(range(old), old).mapPartitions(
        functools.partial(read_partitions, read)).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        total = rows.count()
        bad = rows.filter(is_error).map(lambda row: row[-1]).take(5)
        if bad:
            raise UnmappableKeyError(f"key_of cannot map {'every' if len(bad) < 5 else 'at least 5'} of these "
                                     f"stored keys of {read.key}; nothing was written: {'; '.join(bad)}")
        columns = StructType([StructField(f.name, f.dataType, True) for f in schema.fields] + [
            StructField("_blobstate_op", BinaryType(), False), StructField("_blobstate_error", StringType(), True)])
        rdd = spark.createDataFrame(rows, columns).repartition(num_partitions, *cols).rdd
        if rdd.getNumPartitions() != num_partitions:
            raise ConfigurationError(f"Spark planned {rdd.getNumPartitions()} partitions, not {num_partitions}")
        written = rdd.mapPartitionsWithIndex(functools.partial(write_partition, write)).collect()
    finally:
        rows.unpersist()
    return written, total


def _check(repository: Repository, written: list[Written], total: int, num_partitions: int,
           target: StoreKey) -> list[StagedSnapshot]:
    """Step 5's checks; on a failure the staged blobs are deleted (best effort: else their TTL expires) and
    ``RescaleRefused`` raised."""
    parts = sorted(w.partition for w in written)
    staged = [w.staged for w in written if w.staged is not None]
    duplicates = [d for w in written for d in w.duplicates]
    problem = ""
    if parts != list(range(num_partitions)):
        problem = f"the write job answered for partitions {parts[:20]}, not 0..{num_partitions - 1}"
    elif duplicates:
        problem = (f"keys held by two old partitions ({', '.join(duplicates[:5])}): the source's update wrote keys "
                   "that its rows' key columns do not determine, so no partitioning can hold them")
    elif sum(w.keys for w in written) != total:
        problem = f"{total} keys were read but {sum(w.keys for w in written)} written"
    if not problem:
        return sorted(staged, key=lambda s: s.entry.partition)
    ids = [i for s in staged for i in (s.entry.blob_id, *s.new_blob_ids)]
    try:
        repository.store.delete_many(ids)
    except Exception as exc:  # noqa: BLE001 - the refusal matters more; the blobs expire by their TTL
        log.warning("could not delete the %s staged blobs of %s (they expire by their TTL): %s", len(ids), target,
                    redact(str(exc)))
    raise RescaleRefused(f"rescale into {target} refused, nothing committed: {problem}")


__all__ = ["RescaleAlreadyCommitted", "RescaleRefused", "RescaleResult", "UnmappableKeyError", "key_fields",
           "rescale", "source_state"]
