"""Partitioned state on Spark executors: N RocksDB partitions, one atomic group checkpoint per micro-batch.

``blobstate.spark.partitioned(spark, repo=..., checkpoint_location=..., job=..., store=..., num_partitions=N,
key_cols=[...], local_dir=...)`` returns a ``PartitionedState``; ``ps.start(writer, update)`` runs, per
micro-batch ``b`` (``foreachBatch``, on the driver):

1. the group's records are read (``CheckpointLog.history``; after a batch whose group ran no retention, the records
   this driver knows plus its own append, and only the log's newest is read); a driver whose generation is no
   longer the log's latest is fenced (``FencedError``) before any task runs;
2. one Spark job (``blobstate.spark.partitioned.driver.job``): the batch is repartitioned by ``key_cols`` into N
   partitions (Spark's own hash partitioning, ``pmod(murmur3(key_cols), N)``; a repartition to an explicit number is
   never coalesced by adaptive execution), and task ``p`` runs
   ``blobstate.spark.partitioned.executor.batch_task.run_partition`` on the executor holding partition ``p``'s copy
   (``blobstate.spark.placement.coordinator``; classic PySpark): partition ``p``'s RocksDB (kept open by that executor's
   Python worker since the last batch) brought to the state after ``b - 1`` (local copy reused, or restored and
   verified), ``update(db, rows, ctx)`` staged, the changelog uploaded with a TTL, one ``Prepare`` returned;
3. the driver accepts exactly one prepare per partition made for this batch on top of the generation it expects
   (a retried or speculative attempt's result never reaches ``collect``; one for another batch or base is
   refused), and commits them as one group record (``blobstate.commit.group.GroupCommitter``): the single
   commit point, before ``foreachBatch`` returns, so Spark's ``commits/b`` only exists once every partition's
   change is durable.

A restart (after a crash anywhere) recovers the group's journal on the driver (an open group commit is finished,
resolved or aborted), checks the records against Spark's checkpoint location (its query id; the state of every batch
Spark committed is there), and Spark re-runs the batches after its last commit: a group record of a batch Spark never
committed is superseded by the re-run's (``blobstate.model.chain``: the newest record of a batch wins). Opening a group
with another partitioning is refused: another N (``PartitionCountError``), other key columns or other key column types
(``PartitioningError``; Spark's hash of a row depends on the columns' order and types, so a key would land in a
partition whose state does not hold it). Every group record names the partitioning (``keyColumns``) and the run of the
query (``lineageId``, ``blobstate.spark.committed.alignment``). A key-grouped store (``key_groups=``,
``blobstate.model.keygroups``) may restart with another N: its old partitions are aligned as they are, each new
partition's first task builds its copy from the old partitions' chains that hold its key groups (the base restored and
cut by ``delete_range``, the others' ranges ingested: ``blobstate.spark.partitioned.executor.keygroup_cut``) and
stages it as a snapshot of the batch restored, committed with that batch's group record of the new N
(``blobstate.model.regroup``); no key is rewritten through the update. A store without key groups keeps the
offline ``blobstate spark rescale``. Every ``snapshot_every`` batches, once Spark reports the
batch complete, the listener asks for partition snapshots, taken by a background Spark job off the batch's path and
committed in the next group record (``blobstate.spark.partitioned.driver.snapshots``); a partition then restores from
its newest snapshot and the deltas after it.

Under Spark Connect (no placement there: ``blobstate.spark.placement.coordinator``) the client checks the alignment and
N when it opens, and ``foreachBatch`` (this object, pickled as configuration) opens the group in the server's Python
worker on its first batch and keeps it across batches, as the driver binding's engine does; what that worker holds
(``batch_stats``) is not visible on the client.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter, check_key_groups, check_partition_count
from blobstate.commit.opening import check_current, open_store
from blobstate.config.settings import Settings
from blobstate.config.units import parse_duration_ms
from blobstate.errors import ConfigurationError, FencedError, RepositoryNotFound
from blobstate.model.chain import partition_history
from blobstate.model.keygroups import check_key_groups as check_key_group_count
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.model.regroup import RegroupPlan, current_partitioning, plan_regroup
from blobstate.model.retention import PARTITIONED_RETAIN
from blobstate.repository.repo import Repository
from blobstate.repository.view import read_view
from blobstate.spark.committed.alignment import spark_done, stamp_records
from blobstate.spark.committed.location import CheckpointLocation, is_connect
from blobstate.spark.errors import SparkAlignmentError
from blobstate.spark.executor.spark_hash import check_types
from blobstate.spark.partitioned.driver.handover import HandOvers
from blobstate.spark.partitioned.driver.job import run_tasks
from blobstate.spark.partitioned.driver.partitioning import align_partitions, check_partitioning, recorded_partitioning
from blobstate.spark.partitioned.driver.routing import route_values
from blobstate.spark.partitioned.driver.snapshots import SnapshotRequests, query_active, run_snapshot_job
from blobstate.spark.partitioned.driver.standbys import WarmStandbys, run_warm_job, standby_flag
from blobstate.spark.partitioned.driver.stats import GroupBatchStats, batch_stats
from blobstate.spark.partitioned.executor.batch_task import BatchPlan, PartitionContext, Prepare, Update
from blobstate.spark.partitioned.executor.keygrouped import KeyOf
from blobstate.spark.partitioned.executor.partition import locate_task, release_task
from blobstate.spark.placement.coordinator import SparkPlacement
from blobstate.spark.placement.decommission import enabled as decommission_enabled
from blobstate.spark.placement.decommission import leaving

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

    from blobstate.config.units import Duration

log = logging.getLogger(__name__)
BatchJob = Callable[..., list[Prepare]]  # a batch's Spark job: ``run_tasks``'s shape

KEEP_STATS = 10_000
CLOSE_WAIT_S = 120.0  # how long ``close`` waits for a running snapshot job
RELEASE_WAIT_S = 30.0  # how long ``close`` waits for the executors to close the partitions they keep open
LOCATE_WAIT_S = 30.0  # how long a restarted driver's first batch waits for the executors' report of their copies


class PartitionedState:
    """One Spark query's partitioned state (see the module docstring), on classic PySpark or Spark Connect.

    ``key_cols``: the columns rows are partitioned by; ``local_dir``: where executors keep partitions (each host its
    own); ``task``: the store key's task part (default ``group``); ``retain``, ``ttl_ms`` (blobs until their group
    commits), ``work_dir`` (the driver's journal), ``log_url`` and ``storage_options`` as for the driver binding;
    ``snapshot_every``: after every K-th batch Spark completes (0: never) the listener asks for a snapshot of every
    partition (``blobstate.spark.partitioned.driver.snapshots``), committed in the next group record (retention then
    keeps ``retain`` snapshots per partition and the deltas after them); ``fault_hook``: see ``BatchPlan``;
    ``placement``: run each partition's tasks on the executor holding its copy (classic PySpark, with blobstate's JVM
    helper; ``blobstate.spark.placement.coordinator``); ``settings``: what the driver runs with (default: the
    environment's), sent to the executors with every task (``BatchPlan.settings``); ``key_groups``: a new store's
    number of key groups (``blobstate.model.keygroups``: rows routed by key-group range, every key stored behind its
    key group; recorded with every group record and fixed for the store's life; None: the store's recorded one, or
    none for a new store), ``key_of``: a stored key's key column values (default ``(key,)``), typed as the key
    columns (``blobstate.spark.partitioned.executor.keygrouped``); ``standby``: 1 keeps a warm standby copy of
    each partition on an executor of another host, caught up after every commit off the batch's path, which
    placement hands the partition to when its primary's host is lost (``blobstate.spark.partitioned.driver
    .standbys``; classic PySpark with placement; 0: none).
    """

    def __init__(self, spark: SparkSession, *, repo: str, checkpoint_location: str, num_partitions: int,
                 key_cols: list[str], local_dir: str, job: str = "default", store: str = "state",
                 task: str = "group", log: str | None = None, work_dir: str | None = None,
                 storage_options: dict[str, Any] | None = None, retain: int = PARTITIONED_RETAIN,
                 ttl: Duration = DEFAULT_TTL_MS,
                 snapshot_every: int = 10, placement: bool = True,
                 fault_hook: Callable[[str, PartitionContext], None] | None = None,
                 settings: Settings | None = None, key_groups: int | None = None,
                 key_of: KeyOf | None = None, standby: int = 0) -> None:
        ttl_ms = parse_duration_ms(ttl)
        #: what the driver and, sent with every task, the executors run with (``Settings.for_call``)
        self.settings = Settings.for_call(settings)
        if not key_cols:
            raise ConfigurationError("key_cols must name at least one column")
        check_partition_count([], num_partitions, "")
        if snapshot_every < 0 or retain < 2:
            raise ConfigurationError("snapshot_every must be >= 0 (0: never) and retain >= 2")
        self.snapshot_every = snapshot_every
        self.placement = placement
        self.standby = standby_flag(standby)
        self.spark: SparkSession | None = spark
        self.connect = is_connect(spark)
        self.key = StoreKey(job, task, store)
        self.repo_url, self.log_url, self.storage_options = repo, log, storage_options
        self.checkpoint_location, self.num_partitions = checkpoint_location, num_partitions
        self.key_cols, self.local_dir = list(key_cols), os.path.abspath(local_dir)
        self.work_dir, self.retain, self.ttl_ms, self.fault_hook = work_dir, retain, ttl_ms, fault_hook
        self.query_id: str | None = None
        self.last_committed: int | None = None
        self.stats: deque[GroupBatchStats] = deque(maxlen=KEEP_STATS)
        #: the store's number of key groups (``open``: the recorded one, else the one asked for; 0: none), the
        #: stored key -> key column values of a key-grouped store, and the route of each partition
        self.key_groups, self._asked_key_groups, self.key_of = 0, key_groups, key_of
        self._routes: tuple[int, ...] = ()
        self._regroup: RegroupPlan | None = None  # the first batch of a rescale at restart (``open``)
        self._types: tuple[str, ...] = ()
        self._repo: Repository | None = None
        self._committer: StoreCommitter | None = None
        self._groups: GroupCommitter | None = None
        self._update: Update | None = None
        self._query: StreamingQuery | None = None
        self._broken: BaseException | None = None
        self._history: list[Checkpoint] = []  # the group's records as of this driver's last commit
        self._history_current = False  # _history is the log's (nothing pruned since): only the newest is read
        self._next_snapshot = snapshot_every - 1  # the first batch whose completion asks for snapshots
        self._session: SparkSession | None = spark  # the session snapshot jobs run in (the batch's, on Connect)
        self.snapshots = SnapshotRequests(self._snapshot_job, ttl_ms=ttl_ms)
        self.standbys = WarmStandbys(self._warm_job)  # ``standby=1``: where each partition's standby is
        self.handovers: HandOvers | None = None  # classic PySpark with placement: decommissions heard (``handover``)
        self._listener: Any = None
        self._placer: SparkPlacement | None = None  # classic PySpark: where each partition's copy is
        self._run_id: str | None = None
        self._closing = False
        self.lineage_id = ""  # the run of the query this driver continues or begins (``open``)
        self.before_first: int | None = None  # the batch batch 0 runs after: an adopted initial state's (``open``)
        self._stamped = False  # this driver's records carry the run and the partitioning (first batch)

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def open(self, spark: SparkSession | None = None) -> None:
        """Through the Open door (``blobstate.commit.opening.open_store``): recover the group's journal, read its
        records once and pin the generation from that read, then check them against Spark's checkpoint location and N
        (``blobstate.spark.partitioned.driver.partitioning.align_partitions``). Under Spark Connect the client
        (``spark`` None) only checks; the server's worker opens with its batch's session. Raises
        ``SparkAlignmentError``, ``PartitionCountError`` (nothing changed)."""
        client = self.connect and spark is None
        location = CheckpointLocation(spark or self.spark, self.checkpoint_location)
        self.query_id, self.last_committed = location.query_id(), location.last_committed()
        planned = location.last_planned()
        try:
            self._repo = Repository.open(self.repo_url, log=self.log_url, storage_options=self.storage_options,
                                         create=spark_done(self.last_committed, planned) is None,
                                         settings=self.settings)
        except RepositoryNotFound:
            raise SparkAlignmentError(f"Spark committed batch {self.last_committed} in {self.checkpoint_location}, "
                                      f"but {self.repo_url} holds no blobstate repository") from None
        aligned = functools.partial(align_partitions, key=self.key, key_cols=self.key_cols,
                                    last_committed=self.last_committed, last_planned=planned, query_id=self.query_id,
                                    location=self.checkpoint_location, repo_url=self.repo_url)

        def align(history: list[Checkpoint]) -> tuple[list[Any], RegroupPlan | None]:
            # a key-grouped store restarted with another N: its old partitions aligned, then their ranges reassigned
            groups = [cp for cp in current_partitioning(history) if cp.is_group and cp.partitions]
            old = groups[-1].num_partitions if groups else self.num_partitions
            if not groups or not groups[-1].key_groups or old == self.num_partitions:
                return aligned(history, num_partitions=self.num_partitions), None
            plans = aligned(history, num_partitions=old)
            check_partition_count(history, self.num_partitions, f"{self.key}", rescale=True)
            batch = plans[0].restored_batch
            return plans, (None if batch is None else
                           plan_regroup(history, new_partitions=self.num_partitions, batch=batch, what=f"{self.key}"))

        try:
            if client:  # a reader: it checks, and commits nothing
                align(list(read_view(self._repo, self.key).history))
                self.close()
                return
            # the Open door: the committer (its journal recovered), the view pinned, then the plan from that view
            opened = open_store(self.key, self._repo, align, committer=lambda: StoreCommitter(
                self.key, self._repo, store_type="rocksdb", work_dir=self.work_dir, retain=self.retain,
                ttl_ms=self.ttl_ms))
            self._committer, self._history, (plans, self._regroup) = opened.committer, opened.history, opened.plan
            self.lineage_id = plans[0].lineage_id
            self.before_first = plans[0].restored_batch if plans[0].adopted else None  # an initial state: -1
            self.key_groups = check_key_groups(self._history, self._asked_key_groups, f"{self.key}")
            if self.key_groups:
                check_key_group_count(self.key_groups, self.num_partitions)
                if self.connect:
                    raise ConfigurationError("a key-grouped partitioned state runs on classic PySpark only for now")
                self._routes = route_values(spark or self.spark, self.num_partitions)
            self._groups = GroupCommitter(self._committer, num_partitions=self.num_partitions,
                                          key_groups=self.key_groups)
            if self.placement and not self.connect:
                sc = (spark or self.spark).sparkContext
                draining = decommission_enabled(sc)  # else nothing is ever decommissioned: no polling
                self._placer = SparkPlacement(sc, self.num_partitions, leaving=leaving if draining else None)
                if draining and self._placer.available:  # a decommissioned executor's partitions move before it goes
                    self.handovers = HandOvers(self._placer, self._latest_plan, self._warm_job).start()
            if self.standby and (self._placer is None or not self._placer.available):
                log.warning("standby=1 needs placement (classic PySpark with blobstate's JVM helper): %s runs "
                            "without standbys", self.key)
        except BaseException:
            self.close()
            raise

    def start(self, writer: DataStreamWriter, update: Update | None = None, *, query_name: str | None = None,
              batch_function: Callable[[DataFrame, int], Any] | None = None) -> StreamingQuery:
        """Start ``writer`` with ``foreachBatch`` running ``update(db, rows, ctx)`` on every partition of every
        batch (``db``: ``StagedWrites`` of the partition's RocksDB, ``rows``: an iterator of ``Row``, ``ctx``: a
        ``PartitionContext``), or ``batch_function(df, batch_id)`` calling ``run_batch`` with its own ``job``. One
        query per ``PartitionedState``: ``ConfigurationError`` otherwise."""
        if self._update is not None:
            raise ConfigurationError(f"the partitioned state {self.key} runs one query")
        self._update = update or batch_function
        writer = writer.foreachBatch(batch_function or self.run_batch).option("checkpointLocation",
                                                                              self.checkpoint_location)
        if query_name:
            writer = writer.queryName(query_name)
        # Under Spark Connect the server's worker asks for snapshots (``run_batch``) and a client-side listener has
        # nothing to ask; worse, pyspark's Connect client removes its last listener holding its bus lock while it
        # joins the event thread, which needs that lock to post an event that arrives meanwhile (the stopped
        # query's): ``close`` hung in ``removeListener``.
        if self.snapshot_every > 0 and self._listener is None and not self.connect:
            from blobstate.spark.committed.listener import CommitListener

            self._listener = CommitListener(self)
            self.spark.streams.addListener(self._listener)
        self._query = writer.start()
        self._run_id = str(self._query.runId)
        if self.query_id is None:
            self.query_id = str(self._query.id)
        return self._query

    def close(self) -> None:
        """Stop the query if it runs and release the driver's session and repository. Idempotent.

        In this order, so that a clean shutdown logs no error: the listener is detached first (a late progress event
        of the stopping query schedules no snapshot job and calls nothing), then the query stops, the listener is
        removed from the session (before the caller can stop the SparkContext), a snapshot job already running is
        waited for (``CLOSE_WAIT_S``), and the executors close the partitions they keep open (classic PySpark, while
        the SparkContext runs; bounded by ``RELEASE_WAIT_S``, else they close once idle). The committed state stays
        readable: ``blobstate.api.restore`` (one partition with ``partition=``) or ``blobstate restore
        --partition``."""
        self._closing = True
        handovers, self.handovers = self.handovers, None
        if handovers is not None:
            handovers.stop(CLOSE_WAIT_S)
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.detach()
        if self._query is not None and self._query.isActive:
            self._query.stop()
        if listener is not None and self.spark is not None:
            self.spark.streams.removeListener(listener)
        if not self.snapshots.wait(CLOSE_WAIT_S):
            log.warning("the snapshot job of %s still runs after %s s; its blobs expire by TTL", self.key,
                        CLOSE_WAIT_S)
        if not self.standbys.wait(CLOSE_WAIT_S):
            log.warning("the warm job of %s still runs after %s s", self.key, CLOSE_WAIT_S)
        placer, self._placer = self._placer, None
        if placer is not None and self._history and placer.sc._jsc is not None:
            placer.release(functools.partial(release_task, self.local_dir, self.key), self.num_partitions,
                           f"{self.key}", RELEASE_WAIT_S)
        if self._committer is not None:
            self._committer.close()
            self._committer = None
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    # live in the process that opened them
    _HANDLES = ("_repo", "_committer", "_groups", "_query", "_broken", "_session", "_listener", "snapshots",
                "_stamped", "_placer", "_history_current", "standbys", "handovers")

    def __getstate__(self) -> dict[str, Any]:
        """Configuration only (Spark Connect pickles ``foreachBatch`` to the server): no session, no handles."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._HANDLES}
        state.update(spark=None, stats=deque(maxlen=KEEP_STATS))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.update(dict.fromkeys(self._HANDLES))
        self.snapshots = SnapshotRequests(self._snapshot_job, ttl_ms=self.ttl_ms)
        self.standbys = WarmStandbys(self._warm_job)

    def __enter__(self) -> PartitionedState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- a micro-batch -----------------------------------------------------------------------------------------
    def run_batch(self, df: DataFrame, batch_id: int, update: Update | None = None, *,
                  job: BatchJob | None = None) -> Checkpoint:
        """The ``foreachBatch`` function (steps 1-3 of the module docstring); returns the group record. ``job``: the
        batch's Spark job in place of ``run_tasks`` (same arguments and answer), e.g. ``blobstate.spark.stateful``'s.
        Raises ``FencedError`` (another driver owns the group), the tasks' errors (after Spark's task retries),
        ``ConfigurationError`` for prepares that do not cover every partition, and what the group commit raises.
        """
        update = update or self._update
        if self.connect and self._groups is None and self._broken is None:
            self.open(df.sparkSession)  # Spark Connect: the first batch in the server's Python worker
        if (update is None and job is None) or self._groups is None or self._committer is None or self._repo is None:
            raise ConfigurationError("the partitioned state is not open or has no update function")
        if self._broken is not None:
            raise ConfigurationError(f"the partitioned state {self.key} stopped after an earlier failure "
                                     f"({type(self._broken).__name__}); restart the query") from self._broken
        if self.query_id is None:  # the first batch can run before ``start`` returns: Spark's metadata has the id
            self.query_id = CheckpointLocation(df.sparkSession, self.checkpoint_location).query_id()
        if self.connect:  # no listener reaches the server's worker: Spark completed batch_id - 1 before this one
            self._session = df.sparkSession
            self.request_snapshot(batch_id - 1)
        if not self._stamped:  # the key columns' Spark types are known from the first batch's schema
            check_partitioning(recorded_partitioning(self._history), self.key_cols, self._key_types(df),
                               f"{self.key}")
            self._types = tuple(self._key_types(df))
            if self.key_groups:
                check_types(self._types)
            stamp_records(self._committer, lineage_id=self.lineage_id,
                          key_columns=tuple(zip(self.key_cols, self._types, strict=True)))
            self._stamped = True
        base = self._committer.commit_point.generation()
        history = self._history if self._history_current else self._repo.log.history(self.key)
        check_current(self._committer, self._repo.log.latest(self.key) if self._history_current else (
            history[-1] if history else None))  # another driver appended since: its plan would not hold
        plan = self._plan(history, base, batch_id, batch_id - 1 if batch_id > 0 else self.before_first,
                          self.fault_hook)
        if self._regroup is not None:  # each new partition starts from the old partitions' chains, cut to its range
            if plan.upto != self._regroup.batch:
                raise ConfigurationError(f"batch {batch_id} of a rescale planned at batch {self._regroup.batch}")
            plan = dataclasses.replace(plan, records={}, regroup={p.partition: p for p in self._regroup.partitions})
        placer = self._placer
        if placer is not None and not placer.placement.holders and history:
            # a restarted driver: where the executors' hosts have copies
            placer.locate(functools.partial(locate_task, plan.local_dir, plan.key, plan.num_partitions),
                          plan.records, f"{plan.key}", LOCATE_WAIT_S)
        locations = placer.choose() if placer is not None else []
        place = functools.partial(placer.place, locations=locations) if placer is not None else None
        t0 = time.perf_counter()
        prepares = (job or run_tasks)(df, plan, update, self.key_cols, place=place)
        t1 = time.perf_counter()
        accepted = accept(prepares, plan)
        snapshots = [] if plan.regroup else self.snapshots.take(batch_id)  # a rescale's carries its own
        staged = [s.staged for s in snapshots if s.staged] + [p.snapshot for p in accepted if p.snapshot]
        warm = self.standby and placer is not None
        replicas = self.standbys.replicas([p.task.executor for p in accepted], placer.placement) if warm else ()
        try:
            group = self._groups.commit([p.entry for p in accepted] + [s.entry for s in staged],
                                        batch_id=batch_id, query_id=plan.query_id,
                                        created_ms=min(p.created_ms for p in [*accepted, *snapshots]),
                                        new_blob_ids=[b for s in staged for b in s.new_blob_ids],
                                        replicas=replicas)
        except FencedError:
            raise
        except BaseException as exc:
            self._broken = exc  # the group's outcome may be unknown: only a restart (recovery) is right now
            raise
        if placer is not None:
            for p in accepted:
                placer.placement.record(p.partition, p.task.executor)
        regroup = self._regroup
        self.stats.append(batch_stats(group, accepted, snapshots, locations, job_ms=(t1 - t0) * 1000,
                                      commit_ms=(time.perf_counter() - t1) * 1000, key_groups=self.key_groups,
                                      regrouped=regroup and (regroup.old_partitions, regroup.new_partitions),
                                      replicas=replicas))
        self._history = [*history, group]
        if warm:  # the standbys caught up to this group, off the batch's path (``standbys``)
            self.standbys.request(placer.placement, placer.live_executors,
                                  functools.partial(self._plan, self._history, group.generation, batch_id, batch_id),
                                  batch_id)
        self._regroup = None
        self._history_current = not staged  # a group with snapshot parts ran retention: read the log again
        return group

    def _plan(self, history: list[Checkpoint], base: int, batch_id: int | None, upto: int | None = None,
              fault_hook: Callable[[str, PartitionContext], None] | None = None) -> BatchPlan:
        """The plan of batch ``batch_id`` (or of a snapshot of ``batch_id``) on top of generation ``base``."""
        current = current_partitioning(history)  # a partition number means its range in one partitioning only
        return BatchPlan(self.repo_url, self.key, self.local_dir, self.num_partitions,
                         -1 if batch_id is None else batch_id, base, upto,
                         {p: tuple(partition_history(current, p)) for p in range(self.num_partitions)},
                         self.query_id or "", self.log_url, self.storage_options, self.ttl_ms, fault_hook,
                         self.settings, key_groups=self.key_groups, key_types=self._types, key_of=self.key_of,
                         routes=self._routes)

    def _key_types(self, df: DataFrame) -> list[str]:
        """The Spark types of the key columns in ``df`` (``simpleString``: ``string``, ``int``, ``struct<...>``)."""
        return [df.schema[c].dataType.simpleString() for c in self.key_cols]

    # -- snapshots (listener target) ---------------------------------------------------------------------------
    def on_batch_committed(self, run_id: str, batch_id: int) -> None:
        """Spark completed ``batch_id`` of run ``run_id`` (the listener's thread; other runs are ignored)."""
        if self._run_id is None or run_id == self._run_id:
            self.request_snapshot(batch_id)

    def on_listener_error(self, exc: BaseException) -> None:
        log.error("blobstate's Spark listener failed: %s", exc)

    def _snapshot_job(self, plan: BatchPlan) -> list[Any]:
        placer = self._placer
        place = functools.partial(placer.place, locations=placer.choose()) if placer is not None else None
        return run_snapshot_job(self._session, plan, place=place)

    def _latest_plan(self) -> BatchPlan | None:
        """The plan of the newest batch this driver committed or found (None before the first): a hand-over's."""
        history = self._history
        if not history or history[-1].batch_id is None:
            return None
        last = history[-1]
        return self._plan(history, last.generation, last.batch_id, last.batch_id)

    def _warm_job(self, plan: BatchPlan, targets: tuple[tuple[int, str], ...]) -> list[Any] | None:
        placer = self._placer
        return run_warm_job(placer, plan, targets) if placer is not None else None

    def request_snapshot(self, batch_id: int) -> bool:
        """Ask for a snapshot of every partition's state after ``batch_id`` (which Spark completed) when it is due
        (``snapshot_every``) and this driver committed it; True when the background job started. Classic: the
        listener asks; Spark Connect: the server's worker asks at the start of the next batch."""
        history = self._history
        if getattr(self, "_closing", False) or not (self.connect or query_active(self._query)):
            return False
        if self.snapshot_every <= 0 or batch_id < self._next_snapshot or not history or \
                history[-1].batch_id is None or history[-1].batch_id < batch_id:
            return False
        plan = self._plan(history, history[-1].generation, batch_id, batch_id)
        if not self.snapshots.request(plan):
            return False
        self._next_snapshot = batch_id + self.snapshot_every
        return True

    @property
    def batch_stats(self) -> list[GroupBatchStats]:
        """Per committed batch of this process. Raises ``ConfigurationError`` under Spark Connect (the batches run
        in the server's Python worker)."""
        if self.connect:
            raise ConfigurationError("batch_stats is not available under Spark Connect: the partitioned state runs "
                                     "in the server's Python worker, not in this process")
        return list(self.stats)


def accept(prepares: list[Prepare], plan: BatchPlan) -> list[Prepare]:
    """Exactly one prepare per partition of ``plan``, made for its batch on top of its base generation, in
    partition order. Others (another batch, another base, a duplicate) are ignored with a warning: their blobs
    expire by TTL. Raises ``ConfigurationError`` when a partition has none."""
    chosen: dict[int, Prepare] = {}
    for p in prepares:
        if p.batch_id != plan.batch_id or p.base != plan.base or p.partition in chosen or \
                not 0 <= p.partition < plan.num_partitions:
            log.warning("ignoring the prepare of partition %s (batch %s, base %s, attempt %s): batch %s expects "
                        "base %s", p.partition, p.batch_id, p.base, p.attempt, plan.batch_id, plan.base)
            continue
        chosen[p.partition] = p
    missing = [p for p in range(plan.num_partitions) if p not in chosen]
    if missing:
        raise ConfigurationError(f"batch {plan.batch_id}: no prepare of partitions {missing[:10]}; nothing committed")
    return [chosen[p] for p in range(plan.num_partitions)]


def partitioned(spark: SparkSession, *, repo: str, checkpoint_location: str, num_partitions: int,
                key_cols: list[str], local_dir: str, job: str = "default", store: str = "state",
                task: str = "group", log: str | None = None, work_dir: str | None = None,
                storage_options: dict[str, Any] | None = None, retain: int = PARTITIONED_RETAIN,
                ttl: Duration = DEFAULT_TTL_MS,
                snapshot_every: int = 10, placement: bool = True,
                fault_hook: Callable[[str, PartitionContext], None] | None = None,
                settings: Settings | None = None, key_groups: int | None = None,
                key_of: KeyOf | None = None, standby: int = 0) -> PartitionedState:
    """Open a partitioned state (``PartitionedState``'s keywords) and check it against Spark's checkpoint.

    Example::

        ps = blobstate.spark.partitioned(spark, repo="s3://bucket/state", checkpoint_location="/ck/flights",
                                         job="flights", store="routes", num_partitions=8,
                                         key_cols=["origin", "dest"], local_dir="/nvme/blobstate")
        def update(db, rows, ctx): ...        # on an executor; db: partition ctx.partition's staged writes
        query = ps.start(stream.writeStream, update)

    Raises ``SparkAlignmentError``, ``PartitionCountError``, ``PartitioningError`` (nothing changed).
    """
    state = PartitionedState(spark, repo=repo, checkpoint_location=checkpoint_location,
                             num_partitions=num_partitions, key_cols=key_cols, local_dir=local_dir, job=job,
                             store=store, task=task, log=log, work_dir=work_dir, storage_options=storage_options,
                             retain=retain, ttl=ttl, snapshot_every=snapshot_every, placement=placement,
                             fault_hook=fault_hook, settings=settings, key_groups=key_groups, key_of=key_of,
                             standby=standby)
    state.open()
    return state


__all__ = ["PartitionedState", "accept", "partitioned"]
