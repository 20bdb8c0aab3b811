"""The doors' actors (issue 39): streaming queries that open their store through the Open door and align with their
engine's own commit log through the Align door, and the writers and readers beside them, through the real code paths
that run without Spark (profile ``doors``, ``blobstate.testing.simulation.scenarios``).

The engine (``Engine``) is a simulated Spark checkpoint location: the query's id and the batches it committed
(``commits/``), each only once its delta or group commit returned (``foreachBatch`` returned), and which attempt of a
batch it committed (a batch re-run with other data after a sink failed: ``~<attempt>`` in the model name of its
writes). Programs:

- ``driver_query``: a query on a driver store as the driver binding's engine runs it: the Open door
  (``blobstate.commit.opening.open_store``) with ``blobstate.spark.committed.alignment.plan_alignment`` as its plan, the
  restored state checked against what the engine committed, a delta per batch, a snapshot every few; restarted on
  ``switch_to`` after its batches (the store a ``write_state`` wrote for it, ``state_writer``); with ``rerun``, a
  sink that fails after blobstate's commit point, and Spark re-runs the batch with other data;
- ``group_query``: the same for a partitioned store (``align_partitions``, a group of changelog parts per batch,
  ``run_batch``'s fence ``check_current``), restarted on a rescaled store (``engine_rescale``); two of them on a
  store holding an initial state (``initial_writer``) are its two adopters;
- ``state_writer``: ``write_state(checkpoint_location=...)`` racing the query: the state after the batch the engine
  committed (``blobstate.restoring.state.plan_state`` given the engine's log), written as a new driver store's one
  snapshot of that batch (``open_destination``);
- ``engine_rescale``: ``blobstate spark rescale --checkpoint-location`` racing the query (the rescale actor's run,
  ``rescaler.rescale_once``, at the batch the engine committed);
- ``initial_writer``: ``write_state(initial_state=True)`` of a partitioned store;
- ``reader``: ``read_state`` beside the query whose sink fails: given the engine's log it reads exactly what the
  engine committed; without it, the state is said to be unconfirmed.

Invariants: a (re)started query is accepted only with exactly the state after the batch its engine committed
(``wrong``: issue 39 case 4, a snapshot of an older batch standing for a later one); at the run's end
(``check_engines``) every engine's committed state restores exactly from the store it last committed to (``lost``:
case 5, a second adopter stacked on the first one's batches); a reader given the engine's log reads what it
committed (``wrong``: case 6).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from blobstate.commit.delta import DeltaCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.commit.opening import check_current, open_store
from blobstate.commit.parts import heal_parts
from blobstate.errors import BlobstateError, IntegrityError, NothingToRestore
from blobstate.model import changelog, layout
from blobstate.model.align import EngineLog, align
from blobstate.model.chain import INITIAL_BATCH, Chain, partition_history
from blobstate.model.records import PartitionEntry, StoreKey
from blobstate.restoring.state import plan_state
from blobstate.spark.committed.alignment import plan_alignment
from blobstate.spark.data.executor.tasks import RepositoryRef
from blobstate.spark.data.write import Target, commit_written, open_destination
from blobstate.spark.partitioned.driver.partitioning import align_partitions
from blobstate.testing.simulation import model, rescaler
from blobstate.testing.simulation.actors import _Executor, committer_of, restore_into
from blobstate.testing.simulation.invariants import Violation
from blobstate.worker import stage_changelog

if TYPE_CHECKING:
    from blobstate.commit.backup import StoreCommitter
    from blobstate.repository.repo import Repository
    from blobstate.spark.committed.alignment import AlignmentPlan
    from blobstate.testing.simulation.scheduler import Actor
    from blobstate.testing.simulation.stage import Stage

KEY_COLUMNS = (("key", "string"),)  # the partitioning every group of this module records (the rescale's too)


@dataclass
class Engine:
    """A query's own commit log (see the module docstring): ``name`` is the model name of its writes, ``key`` the
    store it commits to now (``partitions`` of it, 0: a driver store; ``layout``: ``(n, m)`` once it runs on a
    store rescaled from n to m partitions), ``base`` the initial state it adopted (per partition)."""

    name: str
    query_id: str
    committed: list[int] = field(default_factory=list)
    attempts: dict[int, int] = field(default_factory=dict)  # batch -> the attempt the engine committed
    tried: dict[int, int] = field(default_factory=dict)  # batch -> attempts run
    key: StoreKey | None = None
    partitions: int = 0
    layout: tuple[int, int] | None = None
    base: dict[int | None, dict[str, str]] = field(default_factory=dict)

    def log(self) -> EngineLog:
        return EngineLog(self.committed[-1] if self.committed else None, f"the engine of query {self.name}",
                         self.query_id)

    def commit(self, batch: int, attempt: int, key: StoreKey, partitions: int = 0,
               shape: tuple[int, int] | None = None) -> None:
        """Spark's ``commits/<batch>``: ``attempt`` of ``batch`` committed on ``key`` (its state is there now)."""
        if batch not in self.committed:
            self.committed.append(batch)
        self.attempts[batch], self.key, self.partitions, self.layout = attempt, key, partitions, shape

    def data(self, partition: int | None, attempt: int = 0, shape: tuple[int, int] | None = None) -> str:
        """The model name of the writes of ``partition`` (None: a driver store) in ``attempt``, on a store of
        ``shape`` (a rescaled store's: ``(n, m)``)."""
        name = self.name if attempt == 0 else f"{self.name}~{attempt}"
        if shape is not None:
            name = model.rescaled(name, *shape)
        return name if partition is None else f"{name}/p{partition}"

    def ops(self, partition: int | None, batch: int, attempt: int = 0,
            shape: tuple[int, int] | None = None) -> list[changelog.Op]:
        return model.ops(self.data(partition, attempt, shape), batch)

    def expected(self, partition: int | None, batch: int, attempts: dict[int, int] | None = None, *,
                 shape: tuple[int, int] | None | str = "committed") -> dict[str, str]:
        """The state of ``partition`` after ``batch`` (-1: the base) as the engine committed it, on a store of
        ``shape`` (default: the one it committed to last)."""
        attempts = self.attempts if attempts is None else attempts
        shape = self.layout if shape == "committed" else shape
        state = dict(self.base.get(partition, {}))
        for b in range(batch + 1):
            state = model.apply(state, self.ops(partition, b, attempts.get(b, 0), shape))  # type: ignore[arg-type]
        return state


_ENGINES: WeakKeyDictionary[Stage, dict[str, Engine]] = WeakKeyDictionary()
_INITIAL: WeakKeyDictionary[Stage, dict[StoreKey, dict[int, dict[str, str]]]] = WeakKeyDictionary()


def engines(sim: Stage) -> dict[str, Engine]:
    return _ENGINES.setdefault(sim, {})


def _engine(sim: Stage, name: str) -> Engine:
    return engines(sim).setdefault(name, Engine(name, f"query-{name}"))


# -- queries -------------------------------------------------------------------------------------------------------
def _open(sim: Stage, actor: Actor, repo: Repository, eng: Engine, key: StoreKey, partitions: int,
          retain: int, shape: tuple[int, int] | None = None
          ) -> tuple[StoreCommitter, list[AlignmentPlan], list[dict[str, str]]] | None:
    """The query's (re)start on ``key`` through the Open door, planned by the Align door with its engine's log;
    the state it restores checked against what the engine committed. None when it is refused (the process exits)."""
    log = eng.log()
    where = dict(last_committed=log.done, query_id=eng.query_id, location=log.where, repo_url=repo.url)
    plan = (functools.partial(align_partitions, key=key, num_partitions=partitions, key_cols=["key"],
                              last_planned=None, **where) if partitions else
            lambda history: [plan_alignment(history, key, **where)])
    try:
        opened = open_store(key, repo, plan, committer=lambda: committer_of(sim, actor, key, repo, retain))
    except (BlobstateError, OSError):
        return None
    plans = opened.plan
    states = []
    try:
        for p, ap in zip(_parts(partitions), plans, strict=True):
            if ap.adopted:
                eng.base[p] = dict(_INITIAL.get(sim, {}).get(key, {}).get(p if p is not None else 0, {}))
            dest = sim.local_dir(actor, f"live-{key.store}-{p}", create=False)
            values = restore_into(repo, ap.chain, dest) if ap.chain is not None else {}
            batch = INITIAL_BATCH if ap.restored_batch is None else ap.restored_batch
            want = eng.expected(p, batch, shape=shape)
            if values != want:
                raise Violation("wrong", f"query {eng.name} (re)started on {key} partition {p} at the engine's batch "
                                         f"{log.done}: restored {ap.chain.describe() if ap.chain else 'nothing'} "
                                         f"as {values}, the engine committed {want}")
            states.append(values)
    except (IntegrityError, OSError):
        opened.committer.close()
        return None
    except BaseException:
        opened.committer.close()
        raise
    opened.committer.commit_point.fields.update(lineage_id=plans[0].lineage_id,
                                                **({"key_columns": KEY_COLUMNS} if partitions else {}))
    return opened.committer, plans, states


def _parts(partitions: int) -> list[int | None]:
    return list(range(partitions)) if partitions else [None]


def driver_query(sim: Stage, actor: Actor, *, key: StoreKey, name: str, batches: int, retain: int,
                 interval_ms: int = 0, switch_to: StoreKey | None = None, switch_after_ms: int = 0, more: int = 0,
                 rerun: float = 0.0, snapshot_every: int = 3) -> None:
    """``batches`` batches on ``key``, then (stopped for ``switch_after_ms``) ``more`` on ``switch_to``."""
    repo = sim.open_repo("log")
    if repo is None:
        return
    eng = _engine(sim, name)
    rng = random.Random(f"{sim.seed}/{actor.name}")
    for store, todo in ((key, batches), (switch_to, more)):
        if store is None:
            return
        if store != key and switch_after_ms:
            layout.sleep(switch_after_ms / 1000)  # the query stopped; the operator restarts it on the new store
        last = (eng.committed[-1] if eng.committed else -1) + todo
        while (eng.committed[-1] if eng.committed else -1) < last:  # a restart after a failed sink re-runs a batch
            opened = _open(sim, actor, repo, eng, store, 0, retain)
            if opened is None:
                return
            committer, plans, states = opened
            try:  # returns True when the sink failed: the query restarts, and Spark re-runs the batch
                _driver_batches(sim, eng, committer, store, states[0], last, interval_ms, rerun, rng, snapshot_every,
                                sim.local_dir(actor, f"live-{store.store}"))
            except (BlobstateError, OSError):
                return  # the process exits (fenced, refused, unknown outcome left for recovery)
            finally:
                committer.close()


def _driver_batches(sim: Stage, eng: Engine, committer: StoreCommitter, key: StoreKey, values: dict[str, str],
                    last: int, interval_ms: int, rerun: float, rng: random.Random, snapshot_every: int,
                    live: str) -> bool:
    """Batches after the engine's up to ``last``; False when the query stops, True for a restart (a sink failed)."""
    deltas = DeltaCommitter(committer)
    model.write_dir(live, values)
    first = (eng.committed[-1] if eng.committed else -1) + 1
    for batch in range(first, last + 1):
        if batch > first and interval_ms:
            layout.sleep(interval_ms / 1000)
        attempt = eng.tried.get(batch, 0)
        eng.tried[batch] = attempt + 1
        ops = eng.ops(None, batch, attempt)
        deltas.commit_changelog(changelog.encode(ops), batch_id=batch, query_id=eng.query_id)
        values = model.apply(values, ops)
        model.write_dir(live, values)
        if attempt < 2 and rng.random() < rerun:
            return True  # the sink raised after the commit point: Spark never commits the batch, and re-runs it
        eng.commit(batch, attempt, key)
        if (batch + 1) % snapshot_every == 0:
            committer.upload(committer.checkpoint(live, batch_id=batch, query_id=eng.query_id))
    return False


def group_query(sim: Stage, actor: Actor, *, key: StoreKey, name: str, partitions: int, batches: int,
                retain: int, interval_ms: int = 0, switch_to: StoreKey | None = None, switch_after_ms: int = 0,
                to_partitions: int = 0, more: int = 0) -> None:
    """``batches`` batches on ``key`` (``partitions``), then (stopped for ``switch_after_ms``) ``more`` on the
    rescaled ``switch_to`` (``to_partitions``)."""
    repo = sim.open_repo("log")
    if repo is None:
        return
    eng = _engine(sim, name)
    for store, n, todo in ((key, partitions, batches), (switch_to, to_partitions, more)):
        if store is None:
            return
        if store != key and switch_after_ms:
            layout.sleep(switch_after_ms / 1000)
        shape = (partitions, n) if store != key else None  # a rescaled store: the source's writes, re-mapped
        opened = _open(sim, actor, repo, eng, store, n, retain, shape)
        if opened is None:
            return
        committer = opened[0]
        try:
            groups = GroupCommitter(committer, num_partitions=n)
            first = (eng.committed[-1] if eng.committed else -1) + 1
            for batch in range(first, first + todo):
                if batch > first and interval_ms:
                    layout.sleep(interval_ms / 1000)
                history = repo.log.history(store)
                check_current(committer, history[-1] if history else None)  # run_batch's fence: another driver
                oldest = layout.now_ms()
                entries = [_task(sim, repo, store, p, batch, history, changelog.encode(eng.ops(p, batch, 0, shape)))
                           for p in range(n)]
                groups.commit(entries, batch_id=batch, query_id=eng.query_id, created_ms=oldest)
                eng.commit(batch, 0, store, n, shape)
        except (BlobstateError, OSError):
            return
        finally:
            committer.close()


def _task(sim: Stage, repo: Repository, key: StoreKey, partition: int, batch: int, history: list,
          data: bytes) -> PartitionEntry:
    """Partition ``partition``'s task of ``batch``: its executor host first puts back the committed changelogs gc
    took (``heal_parts``, as ``run_partition`` does), then stages this batch's and keeps it until the next batch."""
    executor = _Executor(sim, key, partition)
    heal_parts(repo, partition_history(history, partition), executor.kept, ttl_ms=sim.ttl_ms)
    executor.clear()
    entry = stage_changelog(repo, key, partition=partition, batch_id=batch, data=data, ttl_ms=sim.ttl_ms)
    executor.keep(entry.checkpoint_id, data)
    return entry


# -- writers and readers beside them -------------------------------------------------------------------------------
def state_writer(sim: Stage, actor: Actor, *, query: str, source: StoreKey, target: StoreKey,
                 retain: int) -> None:
    """``write_state`` of ``query``'s state into the new driver store ``target``, at the batch its engine committed."""
    repo = sim.open_repo("log")
    eng = engines(sim).get(query)
    if repo is None or eng is None or not eng.committed or eng.key != source:
        return  # write_state refuses a checkpoint location with no committed batch
    log, attempts = eng.log(), dict(eng.attempts)
    assert log.done is not None
    try:
        plan = plan_state(repo, source, engine=log)
        values = restore_into(repo, plan.chains[None], sim.local_dir(actor, "read", create=False))
    except (BlobstateError, OSError):
        return
    if values != eng.expected(None, log.done, attempts):
        raise Violation("wrong", f"write_state read {source} at the engine's batch {log.done} as {values}")
    try:
        committer = committer_of(sim, actor, target, repo, retain)
    except (BlobstateError, OSError):
        return
    spec = Target(RepositoryRef(repo.url), target, None, (), (), log.done, eng.query_id, ttl_ms=sim.ttl_ms,
                  retain=retain)
    try:
        open_destination(committer, spec, "state write")
        live = sim.local_dir(actor, "write")
        model.write_dir(live, values)
        committer.upload(committer.checkpoint(live, batch_id=log.done, query_id=eng.query_id))
    except (BlobstateError, OSError):
        return
    finally:
        committer.close()


def engine_rescale(sim: Stage, actor: Actor, *, query: str, source: StoreKey, target: StoreKey,
                   partitions: int, retain: int) -> None:
    """``blobstate spark rescale --checkpoint-location`` of ``query``'s group: the rescale at its engine's batch."""
    repo = sim.open_repo("log")
    eng = engines(sim).get(query)
    if repo is None or eng is None or not eng.committed or eng.key != source:
        return
    sim.rescale_batch[target] = eng.committed[-1]
    sim.rescale_sources[actor.name] = source
    sim.rescale_outcomes.append((actor.name, rescaler.rescale_once(sim, actor, repo, source=source, target=target,
                                                                   partitions=partitions, retain=retain, host=None)))


def initial_writer(sim: Stage, actor: Actor, *, key: StoreKey, name: str, partitions: int, retain: int) -> None:
    """``write_state(initial_state=True)``: a group of snapshots of batch -1, of no query, in a lineage of its own."""
    repo = sim.open_repo("log")
    if repo is None:
        return
    values = {p: model.state(f"{name}/p{p}", 1) for p in range(partitions)}
    _INITIAL.setdefault(sim, {})[key] = values  # known before it can land: an adopter checks what it restores
    try:
        committer = committer_of(sim, actor, key, repo, retain)
    except (BlobstateError, OSError):
        return
    spec = Target(RepositoryRef(repo.url), key, partitions, ("key",), KEY_COLUMNS, INITIAL_BATCH, "",
                  ttl_ms=sim.ttl_ms, retain=retain, lineage_id=layout.new_token())
    try:
        open_destination(committer, spec, "state write")
        committer.commit_point.fields["lineage_id"] = spec.lineage_id
        written = [rescaler._write(sim, actor, repo, key, INITIAL_BATCH, p, values[p], []) for p in range(partitions)]
        commit_written(committer, written, spec, what="state write", expect_keys=sum(map(len, values.values())))
    except (BlobstateError, OSError):
        return
    finally:
        committer.close()


def reader(sim: Stage, actor: Actor, *, query: str, key: StoreKey, reads: int, gap_ms: int) -> None:
    """``read_state`` of ``query``'s store, given its engine's log and without it, ``reads`` times."""
    repo = sim.open_repo("log")
    if repo is None:
        return
    for i in range(reads):
        if i:
            layout.sleep(gap_ms / 1000)
        eng = engines(sim).get(query)
        if eng is None or eng.key != key:
            continue
        log, attempts = eng.log(), dict(eng.attempts)
        try:
            plan = plan_state(repo, key, engine=log)
            values = restore_into(repo, plan.chains[None], sim.local_dir(actor, "read", create=False))
            newest = plan_state(repo, key)
        except (BlobstateError, OSError):
            continue  # not retained any more, or a fault's damage: the reader exits with the error
        want = eng.expected(None, INITIAL_BATCH if log.done is None else log.done, attempts)
        if values != want:
            raise Violation("wrong", f"a reader given query {query}'s commit log (batch {log.done}) read "
                                     f"{plan.chains[None].describe()} as {values}, the engine committed {want}")
        if not newest.unconfirmed_engine_state:
            raise Violation("unconfirmed", f"a reader of {key} without the engine's log read batch "
                                           f"{newest.batch_id} without saying it may be one the engine re-runs")


# -- the run's end ---------------------------------------------------------------------------------------------------
def check_engines(sim: Stage) -> None:
    """Every engine's committed state restores exactly from the store it last committed to (``Violation``)."""
    repo = sim.checker.repos["log"]
    for eng in engines(sim).values():
        if not eng.committed or eng.key is None:
            continue
        history = repo.log.history(eng.key)
        log = eng.log()
        assert log.done is not None
        for p in _parts(eng.partitions):
            records = history if p is None else partition_history(history, p)
            if p is not None:  # the restarted query's next batch: its tasks put back what gc took of the last group
                heal_parts(sim.repos["log"], records, _Executor(sim, eng.key, p).kept, ttl_ms=sim.ttl_ms)
            try:
                chain: Chain = align(records, engine=log, what=f"{eng.key} partition {p}").chain
                values = sim.checker.restore(repo, chain)
            except IntegrityError:
                if sim.world.damaged:
                    continue
                raise
            except NothingToRestore as exc:
                raise Violation("lost", f"query {eng.name}'s committed batch {log.done} no longer restores from "
                                        f"{eng.key} partition {p}: {exc}") from None
            if values != eng.expected(p, log.done):
                raise Violation("wrong", f"query {eng.name}'s committed batch {log.done} of {eng.key} partition {p} "
                                         f"restores as {values}, expected {eng.expected(p, log.done)}")


__all__ = ["Engine", "check_engines", "driver_query", "engine_rescale", "engines", "group_query",
           "initial_writer", "reader", "state_writer"]
