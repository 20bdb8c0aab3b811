"""A store's state, or its changes, as a Spark DataFrame: ``read_state`` and ``read_changes``.

``read_state(spark, repo=..., job=..., store=...)`` returns ``(partition int, key, value, key_raw binary, value_raw
binary)``: the state exactly as after batch ``batch_id`` (default: the newest; ``checkpoint`` names a record instead),
of a driver store (``partition`` null) or of every partition of a partitioned one, keys and values as the binding wrote
them (``blobstate.restoring.entries``). The driver plans only: it reads the records, picks each partition's chain
(``blobstate.restoring.state.plan_state``) and builds a DataFrame of one row per partition, ``spark.range(n,
numPartitions=n)``, so that Spark runs one task per partition; each task restores its partition's chain into a scratch
directory of its executor and streams the entries out as Arrow record batches
(``blobstate.spark.data.executor.tasks.read_task`` through ``mapInArrow``). The driver never holds the state: a state
that does not fit one machine is read by the cluster. The DataFrame is lazy; every action reads the repository again
(``persist()`` it to read once). Works on classic PySpark and Spark Connect alike (``mapInArrow``: the `connect` extra's
pyarrow on the executors).

``key`` and ``value`` are typed columns (``key_type``, ``value_type``: ``string``, ``binary``, ``bigint``,
``double``, ``boolean``); by default each is the type most of the store's newest changelog writes (one small blob
read on the driver; ``string`` when the store has no delta). An entry of another type is null there, with its
stored bytes in ``key_raw``/``value_raw``, so nothing is lost (``write_state`` writes such rows back exactly).

``read_changes(spark, ..., from_batch, to_batch)`` returns ``(batch_id bigint, partition int, op string, key, value,
key_raw, value_raw)``: the writes of batches ``from_batch..to_batch`` (both included) from the delta changelogs the
repository retains, ``op`` ``put`` or ``delete`` (``value`` null), one task per partition. Spark's own state data
source reader (its change feed: ``readChangeFeed``, ``changeStartBatchId``..``changeEndBatchId``) and Flink's State
Processor API answer the same need for their own state stores.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from blobstate.config.settings import Settings
from blobstate.entry import find_store, warn_unconfirmed
from blobstate.errors import NothingToRestore
from blobstate.model import changelog
from blobstate.model.chain import current_run, expand_all
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin.records import extra_install_hint, missing_dependency
from blobstate.repository.repo import Repository
from blobstate.restoring.state import change_plans, plan_state
from blobstate.spark.committed.location import CheckpointLocation
from blobstate.spark.data.executor.tasks import ReadPlan, RepositoryRef, TaskInfo, column_type, read_task

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SPARK_TYPES = {str: "string", bytes: "binary", int: "bigint", float: "double", bool: "boolean"}
INFER_FROM = 4  # newest changelogs read on the driver to choose the key and value columns' types


def require_arrow(what: str) -> None:
    """Raise ``MissingDependencyError`` (one line: the ``spark`` extra of this installation) unless pyarrow and
    pandas, which ``mapInArrow`` needs, import; PySpark's own error says it in many lines, from deep in its stack."""
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise missing_dependency(what, exc, extra_install_hint("spark")) from exc


def state_schema(key_type: str, value_type: str, *, changes: bool = False) -> str:
    """The DDL schema of ``read_state`` (``changes``: of ``read_changes``)."""
    head = "batch_id bigint, partition int, op string" if changes else "partition int"
    return f"{head}, key {key_type}, value {value_type}, key_raw binary, value_raw binary"


def infer_types(repo: Repository, history: list[Checkpoint]) -> tuple[str, str]:
    """``(key type, value type)``: the Spark type most keys and values of the store's newest changelogs are
    (``INFER_FROM`` of them), ``string`` for either when they hold none."""
    deltas = sorted((cp for cp in expand_all(current_run(history)) if cp.is_delta),
                    key=lambda cp: cp.generation, reverse=True)[:INFER_FROM]
    keys: Counter[str] = Counter()
    values: Counter[str] = Counter()
    for record in deltas:
        for op, key, value in changelog.decode(repo.read_changelog(record), source=record.changelog_blob_id):
            keys[SPARK_TYPES[type(key)]] += 1
            if op == changelog.PUT:
                values[SPARK_TYPES[type(value)]] += 1
    return (keys.most_common(1)[0][0] if keys else "string", values.most_common(1)[0][0] if values else "string")


def read_frame(spark: SparkSession, plan: ReadPlan, schema: str) -> DataFrame:
    """One task per slot of ``plan``: ``spark.range`` splits n ids over n partitions, one each."""
    n = len(plan.slots)
    if n == 0:
        return spark.createDataFrame([], schema)
    return spark.range(0, n, 1, n).mapInArrow(functools.partial(read_task, plan), schema)


def _types(repo: Repository, key: StoreKey, key_type: str | None, value_type: str | None) -> tuple[str, str]:
    if key_type is None or value_type is None:
        inferred = infer_types(repo, repo.log.history(key))
        key_type, value_type = key_type or inferred[0], value_type or inferred[1]
    return column_type(key_type), column_type(value_type)


def read_state(spark: SparkSession, *, repo: str, job: str, store: str, task: str | None = None,
               batch_id: int | None = None, checkpoint: str | int | None = None,
               partitions: list[int] | None = None, key_type: str | None = None, value_type: str | None = None,
               log: str | None = None, storage_options: dict[str, Any] | None = None,
               log_options: dict[str, Any] | None = None, local_dir: str | None = None,
               on_task: Callable[[int | None, TaskInfo], None] | None = None,
               checkpoint_location: str | None = None, settings: Settings | None = None) -> DataFrame:
    """The state of ``(job, task, store)`` exactly as after batch ``batch_id`` (default: the newest, or with
    ``checkpoint_location``, the query's Spark checkpoint location, the batch Spark committed; or after the batch of
    the record ``checkpoint`` names) as a DataFrame ``(partition, key, value, key_raw, value_raw)`` (the module
    docstring), read by one Spark task per partition (``partitions``: only those). Without a checkpoint location
    the newest state of a query's store may be of a batch Spark re-runs (a sink failed after blobstate's commit):
    a warning says so.

    ``task``: ``0`` for a driver store, ``group`` for a partitioned one (default: whichever exists); ``key_type``,
    ``value_type``: the ``key`` and ``value`` columns' Spark types (default: inferred); ``local_dir``: the
    executors' scratch directory (default: their temporary directory); ``on_task(partition, TaskInfo)``: called in
    each task once its partition is restored (a module-level function); ``settings``: what the driver runs with
    (default: the environment's), sent to the tasks. Example::

        df = blobstate.spark.read_state(spark, repo="s3://bucket/state", job="flights", store="routes")
        df.where("key like 'route/JFK-%'").show()

    Raises, at once on the driver: ``RepositoryNotFound`` (exit 6), ``NothingToRestore`` (exit 5, naming the stores
    there are), ``BatchNotRetained`` (exit 5, naming the oldest readable batch), ``BatchNotCommitted`` (a batch
    after Spark's), ``ConfigurationError``; from an action: the tasks' ``IntegrityError`` (a damaged blob) in
    Spark's error. ``MissingDependencyError`` without pyarrow (the ``spark`` extra).
    """
    require_arrow("blobstate.spark.read_state")
    ref = RepositoryRef(repo, log, storage_options, log_options, Settings.for_call(settings))
    engine = CheckpointLocation(spark, checkpoint_location).engine_log() if checkpoint_location else None
    with ref.open() as repository:
        key = find_store(repository, job, task, store)
        state = plan_state(repository, key, partitions=partitions, batch_id=batch_id, checkpoint=checkpoint,
                           engine=engine)
        types = _types(repository, key, key_type, value_type)
    if batch_id is None and checkpoint in (None, "latest") and state.unconfirmed_engine_state:
        warn_unconfirmed(key, [cp for chain in state.chains.values() for cp in chain.records])
    plan = ReadPlan(ref, key, tuple(state.chains.items()), *types, local_dir=local_dir, on_task=on_task)
    return read_frame(spark, plan, state_schema(*types))


def read_changes(spark: SparkSession, *, repo: str, job: str, store: str, from_batch: int | None = None,
                 to_batch: int | None = None, task: str | None = None, partitions: list[int] | None = None,
                 key_type: str | None = None, value_type: str | None = None, log: str | None = None,
                 storage_options: dict[str, Any] | None = None, log_options: dict[str, Any] | None = None,
                 on_task: Callable[[int | None, TaskInfo], None] | None = None,
                 checkpoint_location: str | None = None, settings: Settings | None = None) -> DataFrame:
    """The writes of batches ``from_batch..to_batch`` (both included; default: every batch whose delta the
    repository retains) as a DataFrame ``(batch_id, partition, op, key, value, key_raw, value_raw)``, one Spark task
    per partition; applied in ``batch_id`` order (each partition's rows keep their batch's order) to the state
    after ``from_batch - 1`` they give the state after ``to_batch`` (with ``checkpoint_location``: at most the
    batch Spark committed). Keywords as for ``read_state``. Raises ``BatchNotRetained`` (exit 5) naming the oldest
    batch whose changes are still held, and what ``read_state`` raises."""
    require_arrow("blobstate.spark.read_changes")
    ref = RepositoryRef(repo, log, storage_options, log_options, Settings.for_call(settings))
    engine = CheckpointLocation(spark, checkpoint_location).engine_log() if checkpoint_location else None
    with ref.open() as repository:
        key = find_store(repository, job, task, store)
        plans = change_plans(repository, key, from_batch=from_batch, to_batch=to_batch, partitions=partitions,
                             engine=engine)
        types = _types(repository, key, key_type, value_type)
    if engine is None and to_batch is None:
        warn_unconfirmed(key, [cp for records in plans.values() for cp in records])
    if not any(plans.values()):
        raise NothingToRestore(f"{key} holds no delta in batches {from_batch}..{to_batch}")
    slots = tuple((p, tuple(records)) for p, records in plans.items())
    plan = ReadPlan(ref, key, slots, *types, changes=True, on_task=on_task)
    return read_frame(spark, plan, state_schema(*types, changes=True))


__all__ = ["infer_types", "read_changes", "read_frame", "read_state", "state_schema"]
