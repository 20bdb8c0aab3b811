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

A stateful processor's store (``transform_with_state``) is read in the shapes of Spark's state data source for
``transformWithState``: ``read_state(..., state_var=NAME)`` (``stateVarName``), ``read_timers``
(``readRegisteredTimers``) and ``read_changes(..., state_var=NAME)`` (``readChangeFeed`` with ``stateVarName``); the
variable's schema comes from the store's metadata document, found on the driver (``blobstate.spark.data.metadata``),
and each task decodes its partition (``blobstate.spark.data.executor.variables``). Every reader opens the repository
the same way (``_opened``).
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blobstate.config.settings import Settings
from blobstate.entry import find_store, warn_unconfirmed
from blobstate.errors import NothingToRestore
from blobstate.model import changelog
from blobstate.model.chain import current_run, expand_all
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin.records import extra_install_hint, missing_dependency
from blobstate.repository.repo import Repository
from blobstate.restoring.entries import user_key
from blobstate.restoring.state import change_plans, key_groups_of, plan_state
from blobstate.spark.committed.location import CheckpointLocation
from blobstate.spark.data.executor.tasks import ReadPlan, RepositoryRef, TaskInfo, column_type, read_task
from blobstate.spark.data.executor.variables import VariableRead, output_schema
from blobstate.spark.data.metadata import store_metadata

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
    key_groups = key_groups_of(history)  # a key-grouped store's keys are typed by the user's key
    for record in deltas:
        for op, key, value in changelog.decode(repo.read_changelog(record), source=record.changelog_blob_id):
            key = user_key(key, key_groups)
            keys[SPARK_TYPES.get(type(key), "binary")] += 1
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


@contextlib.contextmanager
def _opened(spark: SparkSession, what: str, repo: str, job: str, task: str | None, store: str, log: str | None,
            storage_options: dict[str, Any] | None, log_options: dict[str, Any] | None,
            checkpoint_location: str | None, settings: Settings | None) -> Iterator[Opened]:
    """The repository of a read open on the driver, its store named, the Spark checkpoint location's log read:
    what every reader here starts with (``what``: its name, for the missing-dependency error)."""
    require_arrow(what)
    ref = RepositoryRef(repo, log, storage_options, log_options, Settings.for_call(settings))
    engine = CheckpointLocation(spark, checkpoint_location).engine_log() if checkpoint_location else None
    with ref.open() as repository:
        yield Opened(ref, repository, find_store(repository, job, task, store), engine)


@dataclass(frozen=True)
class Opened:
    """A read's repository ``ref`` (for the tasks), the open ``repository``, the store ``key`` and the ``engine``
    log (None without a checkpoint location)."""

    ref: RepositoryRef
    repository: Repository
    key: StoreKey
    engine: Any


def _variable(repository: Repository, chains: Any, state_var: str | None, *, timers: bool = False,
              changes: bool = False) -> VariableRead:
    metadata = store_metadata(repository, chains)
    return VariableRead(state_var, timers, metadata,
                        output_schema(metadata, state_var, timers=timers, changes=changes))


def _spark_schema(read: VariableRead) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(read.schema)


def read_state(spark: SparkSession, *, repo: str, job: str, store: str, task: str | None = None,
               batch_id: int | None = None, checkpoint: str | int | None = None,
               partitions: list[int] | None = None, key_type: str | None = None, value_type: str | None = None,
               log: str | None = None, storage_options: dict[str, Any] | None = None,
               log_options: dict[str, Any] | None = None, local_dir: str | None = None,
               on_task: Callable[[int | None, TaskInfo], None] | None = None,
               checkpoint_location: str | None = None, settings: Settings | None = None,
               state_var: str | None = None) -> DataFrame:
    """The state of ``(job, task, store)`` exactly as after batch ``batch_id`` (default: the newest, or with
    ``checkpoint_location``, the query's Spark checkpoint location, the batch Spark committed; or after the batch of
    the record ``checkpoint`` names) as a DataFrame ``(partition, key, value, key_raw, value_raw)`` (the module
    docstring), read by one Spark task per partition (``partitions``: only those). Without a checkpoint location
    the newest state of a query's store may be of a batch Spark re-runs (a sink failed after blobstate's commit):
    a warning says so.

    ``state_var``: of a stateful processor's store (``transform_with_state``), that state variable in the shape of
    Spark's state data source with ``stateVarName``: ``key`` (a struct of the grouping key), then ``value`` (a value
    state: one row per grouping key), ``list_element`` (a list state: one row per element) or ``user_map_key``,
    ``user_map_value`` (a map state: one row per user key), then ``partition_id`` (int; null for the driver's
    store); a variable with a TTL shows each value as ``{value, ttlExpirationMs}``, as Spark's does.

    ``task``: ``0`` for a driver store, ``group`` for a partitioned one (default: whichever exists); ``key_type``,
    ``value_type``: the ``key`` and ``value`` columns' Spark types (default: inferred); ``local_dir``: the
    executors' scratch directory (default: their temporary directory); ``on_task(partition, TaskInfo)``: called in
    each task once its partition is restored (a module-level function); ``settings``: what the driver runs with
    (default: the environment's), sent to the tasks. Example::

        df = blobstate.spark.read_state(spark, repo="s3://bucket/state", job="flights", store="routes")
        df.where("key like 'route/JFK-%'").show()

    Raises, at once on the driver: ``RepositoryNotFound`` (exit 6), ``NothingToRestore`` (exit 5, naming the stores
    there are), ``BatchNotRetained`` (exit 5, naming the oldest readable batch), ``BatchNotCommitted`` (a batch
    after Spark's), ``ConfigurationError``, ``StateVariableError`` (exit 2: no variable ``state_var``, naming the
    variables there are); from an action: the tasks' ``IntegrityError`` (a damaged blob) in Spark's error.
    ``MissingDependencyError`` without pyarrow (the ``spark`` extra).
    """
    return _read_state(spark, "blobstate.spark.read_state", repo, job, store, task, batch_id, checkpoint, partitions,
                       key_type, value_type, log, storage_options, log_options, local_dir, on_task,
                       checkpoint_location, settings, state_var, timers=False)


def read_timers(spark: SparkSession, *, repo: str, job: str, store: str, task: str | None = None,
                batch_id: int | None = None, checkpoint: str | int | None = None,
                partitions: list[int] | None = None, log: str | None = None,
                storage_options: dict[str, Any] | None = None, log_options: dict[str, Any] | None = None,
                local_dir: str | None = None, on_task: Callable[[int | None, TaskInfo], None] | None = None,
                checkpoint_location: str | None = None, settings: Settings | None = None) -> DataFrame:
    """The timers a stateful processor's store holds registered after batch ``batch_id`` (default: the newest), as
    Spark's state data source gives them with ``readRegisteredTimers``: ``key`` (a struct of the grouping key),
    ``expiration_timestamp_ms`` (bigint, ms since the epoch), ``partition_id``, one row per timer, in time order
    per partition. Keywords and errors as for ``read_state``."""
    return _read_state(spark, "blobstate.spark.read_timers", repo, job, store, task, batch_id, checkpoint,
                       partitions, None, None, log, storage_options, log_options, local_dir, on_task,
                       checkpoint_location, settings, None, timers=True)


def _read_state(spark: SparkSession, what: str, repo: str, job: str, store: str, task: str | None,
                batch_id: int | None, checkpoint: str | int | None, partitions: list[int] | None,
                key_type: str | None, value_type: str | None, log: str | None,
                storage_options: dict[str, Any] | None, log_options: dict[str, Any] | None, local_dir: str | None,
                on_task: Callable[[int | None, TaskInfo], None] | None, checkpoint_location: str | None,
                settings: Settings | None, state_var: str | None, *, timers: bool) -> DataFrame:
    with _opened(spark, what, repo, job, task, store, log, storage_options, log_options, checkpoint_location,
                 settings) as opened:
        state = plan_state(opened.repository, opened.key, partitions=partitions, batch_id=batch_id,
                           checkpoint=checkpoint, engine=opened.engine)
        variable = None
        if state_var is not None or timers:
            variable = _variable(opened.repository, state.chains.values(), state_var, timers=timers)
            types = ("string", "string")
        else:
            types = _types(opened.repository, opened.key, key_type, value_type)
    if batch_id is None and checkpoint in (None, "latest") and state.unconfirmed_engine_state:
        warn_unconfirmed(opened.key, [cp for chain in state.chains.values() for cp in chain.records])
    plan = ReadPlan(opened.ref, opened.key, tuple(state.chains.items()), *types, local_dir=local_dir,
                    on_task=on_task, variable=variable, key_groups=state.key_groups)
    return read_frame(spark, plan, state_schema(*types) if variable is None else _spark_schema(variable))


def read_changes(spark: SparkSession, *, repo: str, job: str, store: str, from_batch: int | None = None,
                 to_batch: int | None = None, task: str | None = None, partitions: list[int] | None = None,
                 key_type: str | None = None, value_type: str | None = None, log: str | None = None,
                 storage_options: dict[str, Any] | None = None, log_options: dict[str, Any] | None = None,
                 on_task: Callable[[int | None, TaskInfo], None] | None = None,
                 checkpoint_location: str | None = None, settings: Settings | None = None,
                 state_var: str | None = None) -> DataFrame:
    """The writes of batches ``from_batch..to_batch`` (both included; default: every batch whose delta the
    repository retains) as a DataFrame ``(batch_id, partition, op, key, value, key_raw, value_raw)``, one Spark task
    per partition; applied in ``batch_id`` order (each partition's rows keep their batch's order) to the state
    after ``from_batch - 1`` they give the state after ``to_batch`` (with ``checkpoint_location``: at most the
    batch Spark committed). Keywords as for ``read_state``.

    ``state_var``: of a stateful processor's store, that variable's change feed, as Spark's state data source's
    ``readChangeFeed`` with ``stateVarName``: ``batch_id``, ``change_type`` (``update`` or ``delete``), ``key``,
    then ``value`` (value state; null for a delete), ``list_value`` (list state: the whole new list, a list being
    one record) or ``user_map_key``, ``user_map_value`` (map state), then ``partition_id``; read with the
    variable's schema as of ``to_batch``.

    Raises ``BatchNotRetained`` (exit 5) naming the oldest batch whose changes are still held, and what
    ``read_state`` raises."""
    with _opened(spark, "blobstate.spark.read_changes", repo, job, task, store, log, storage_options, log_options,
                 checkpoint_location, settings) as opened:
        key = opened.key
        plans = change_plans(opened.repository, key, from_batch=from_batch, to_batch=to_batch,
                             partitions=partitions, engine=opened.engine)
        if not any(plans.values()):
            raise NothingToRestore(f"{key} holds no delta in batches {from_batch}..{to_batch}")
        variable = None
        if state_var is not None:
            newest = max((r.batch_id for records in plans.values() for r in records if r.batch_id is not None),
                         default=None)
            chains = plan_state(opened.repository, key, partitions=partitions, batch_id=newest).chains.values()
            variable = _variable(opened.repository, chains, state_var, changes=True)
            types = ("string", "string")
        else:
            types = _types(opened.repository, key, key_type, value_type)
    if opened.engine is None and to_batch is None:
        warn_unconfirmed(key, [cp for records in plans.values() for cp in records])
    slots = tuple((p, tuple(records)) for p, records in plans.items())
    plan = ReadPlan(opened.ref, key, slots, *types, changes=True, on_task=on_task, variable=variable,
                    key_groups=plans.key_groups)
    return read_frame(spark, plan, state_schema(*types, changes=True) if variable is None else
                      _spark_schema(variable))


__all__ = ["Opened", "infer_types", "read_changes", "read_frame", "read_state", "read_timers", "state_schema"]
