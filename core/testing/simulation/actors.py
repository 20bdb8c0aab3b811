"""The actors' programs: each drives the real pipelines through their public classes, as a process would.

- ``writer``: a store's writer (``StoreCommitter``; with ``deltas``, a ``DeltaCommitter`` commit per batch, its
  changelog in a blob of its own in odd batches and inline in its record in even ones, and a snapshot every
  ``snapshot_every`` batches, Spark's changelog checkpointing); it first restores the latest state
  with the real restore (``blobstate.restoring``) and checks it against the model, like a restarted query. A
  second writer on the same key, a zombie (a writer paused past its TTL), a writer through a second checkpoint log
  on the same blob store are all this program with other parameters and faults; so are a reset of the engine's
  checkpoint (``run``: a new run of the query, its records stamped with a new lineage, from batch 0 on, computing
  another state, ``model.run_name``) and a second query on the same key (``query``: another query id, a new run).
- ``group_owner``: the owner of a partitioned store (``GroupCommitter``): per batch each partition's task stages
  its changelog (``stage_changelog``; every ``snapshot_every`` batches a snapshot too, ``stage_snapshot``), some
  attempts fail and are retried, some run twice speculatively; one part per partition is committed as one group.
  Each partition's executor host (``_Executor``) keeps the changelogs its tasks staged until the next batch, whose
  task first puts back the committed ones gc took (issue 27 case 2, ``blobstate.commit.parts``).
- ``gc``: ``blobstate.maintenance.gc.collect`` over every store of its log, ``runs`` times.
- ``restorer``: the real restore of the latest state of every store (every partition), checked against the model,
  then restore's init cleanup (``cleanup_after_restore``).
- ``recoverer``: ``blobstate.commit.recover.recover`` on the work directory every killed actor left.

Every actor opens its repository the way ``Repository.open`` does (``Stage.open_repo``: the marker is read and
the log's identity checked against the one it records, ``blobstate.repository.marker``), so an actor opened with
a second checkpoint log on the same blob store is refused (issue 27 case 3) and exits.

A program ends quietly on the errors a process would exit on (fenced, a commit refused, an integrity error); the
invariants judge what it left. A restore that gives another state than the model's raises ``Violation``.
"""

from __future__ import annotations

import os
import random
import shutil
from typing import TYPE_CHECKING

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.commit.parts import heal_parts
from blobstate.commit.recover import cleanup_after_restore, recover
from blobstate.commit.session import StoreSession
from blobstate.errors import BlobstateError, IntegrityError, NothingToRestore
from blobstate.local.checksum import crc32c_bytes
from blobstate.maintenance.gc import collect
from blobstate.model import chain as chains
from blobstate.model import layout
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugins.dir_store import DirStore
from blobstate.repository.repo import Repository
from blobstate.restoring import chain as replay
from blobstate.restoring.snapshot import restore_snapshot
from blobstate.testing.simulation import model
from blobstate.testing.simulation.invariants import Violation
from blobstate.worker import stage_changelog, stage_snapshot

if TYPE_CHECKING:
    from blobstate.testing.simulation.scheduler import Actor
    from blobstate.testing.simulation.stage import Stage

APPEND_RESOLVE_S = 2.0


def restore_latest(sim: Stage, repo: Repository, key: StoreKey, name: str, dest: str, *,
                   partition: int | None = None) -> int:
    """Restore the latest state of ``key`` (or of one partition) into ``dest`` with the real restore and check it
    against the model; returns its batch id (-1: nothing to restore). Raises ``Violation`` for a wrong state."""
    try:
        chain = replay.plan(repo, key, partition=partition)
    except NothingToRestore:
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        os.makedirs(dest)
        return -1
    values = restore_into(repo, chain, dest)
    upto = chain.upto if chain.upto is not None else (chain.snapshot.batch_id if chain.snapshot else -1)
    assert upto is not None
    expected = model.state(model.chain_name(name, chain.records), upto)
    if values != expected:
        raise Violation("wrong", f"a restore of {key} (batch {upto}, {chain.describe()}) gave {values}, expected "
                                 f"{expected}")
    return upto


def restore_into(repo: Repository, chain: chains.Chain, dest: str) -> dict[str, str]:
    """The state ``chain`` makes, restored into ``dest`` with the real restore (the snapshot, then the deltas'
    changelogs replayed); returns it. Raises what the restore raises (``IntegrityError``)."""
    if chain.snapshot is not None:
        restore_snapshot(repo, chain.snapshot, dest, local_store=DirStore(), force=True, validate=False)
    else:
        model.write_dir(dest, {})
    values = model.read_dir(dest)
    for delta in chain.deltas:
        values = model.replay(values, repo.read_changelog(delta), delta.changelog_blob_id)
    model.write_dir(dest, values)
    return values


def _start(sim: Stage, repo: Repository, key: StoreKey, name: str, dest: str, partition: int | None,
           from_model: bool) -> int:
    """Restore the latest state into ``dest`` (``from_model``: write the model's state of the latest batch there
    instead, the way a live application holds it); returns its batch id."""
    if not from_model:
        return restore_latest(sim, repo, key, name, dest, partition=partition)
    try:
        chain = replay.plan(repo, key, partition=partition)
    except NothingToRestore:
        model.write_dir(dest, {})
        return -1
    upto = chain.upto if chain.upto is not None else (chain.snapshot.batch_id if chain.snapshot else -1)
    upto = -1 if upto is None else upto
    model.write_dir(dest, model.state(model.chain_name(name, chain.records), upto))
    return upto


def committer_of(sim: Stage, actor: Actor, key: StoreKey, repo: Repository, retain: int,
                 expected: int | None = None, *, host: str | None = None) -> StoreCommitter:
    """``actor``'s committer of ``key`` in the work directory of ``host`` (default: its own), its journal
    recovered as ``StoreCommitter`` does when it opens. Its session is released like a dead process's lock when
    the actor is killed, during that recovery too (so it is registered before the recovery runs). Constructed with a
    placeholder generation, so that nothing in the constructor reaches a scheduling point (a kill there would leave
    its lock held by no one the kill can release); unpinned (``expected`` None), it is forgotten again and read after
    the recovery."""
    wd = sim.work_dir(actor, key, retain, host=host)
    committer = StoreCommitter(key, repo, store_type="dir", work_dir=wd, ttl_ms=sim.ttl_ms, retain=retain,
                               writer_id=actor.name, append_resolve_s=APPEND_RESOLVE_S,
                               expected_generation=0 if expected is None else expected, recover=False)
    actor.resources.append(committer.session)
    try:
        if expected is None:
            committer.commit_point.invalidate()
        committer.recovered = committer.recover()
        committer.commit_point.generation()  # pinned after recovery, as ``StoreCommitter.__init__`` pins it
    except BaseException:
        committer.close()
        raise
    return committer


def pinned_committer(sim: Stage, actor: Actor, key: StoreKey, repo: Repository, retain: int) -> StoreCommitter:
    """``committer_of`` pinned at the generation of ``key``'s newest record as the actor opens the store (0: no
    record yet): the view a writer opens on (issue 27)."""
    opened = repo.log.latest(key)
    return committer_of(sim, actor, key, repo, retain, opened.generation if opened else 0)


def writer(sim: Stage, actor: Actor, *, key: StoreKey, name: str, retain: int, batches: int,
           deltas: bool, snapshot_every: int = 3, log: str = "log", from_model: bool = False,
           interval_ms: int = 0, pin: bool = True, run: str = "", query: str = "") -> None:
    repo = sim.open_repo(log)
    if repo is None:
        return  # refused: the repository's one checkpoint log is another (the process exits 2)
    live = sim.local_dir(actor, "live")
    opened = repo.log.latest(key)  # the view the writer opens on (issue 27: pinned at open)
    committer = committer_of(sim, actor, key, repo, retain, (opened.generation if opened else 0) if pin else None)
    lineage = run or (opened.lineage_id if opened is not None else "")  # a new run, or the one it continues
    query = query or (opened.query_id if opened is not None and opened.query_id else name)
    committer.commit_point.fields = {"lineage_id": lineage} if lineage else {}
    state = model.run_name(name, lineage)
    try:
        # a new run (the engine's checkpoint was reset) starts from nothing; any other writer from the latest state
        start = 0 if run else _start(sim, repo, key, name, live, None, from_model) + 1
        inline, blobs = DeltaCommitter(committer), DeltaCommitter(committer, inline_max_bytes=0)
        delta_commits = (lambda b: blobs if b % 2 else inline) if deltas else None
        for batch in range(start, start + batches):
            if batch > start and interval_ms:
                layout.sleep(interval_ms / 1000)  # the trigger interval between micro-batches
            model.write_dir(live, model.state(state, batch))
            if delta_commits is not None:
                delta_commits(batch).commit_changelog(model.encoded(state, batch), batch_id=batch, query_id=query)
            if delta_commits is None or (batch + 1) % snapshot_every == 0:  # a query's snapshot names its query
                committer.upload(committer.checkpoint(live, batch_id=batch, query_id=query if deltas else ""))
    except (BlobstateError, OSError):
        return  # the process exits on it (fenced, refused, unknown outcome left for recovery)
    finally:
        committer.close()


def group_owner(sim: Stage, actor: Actor, *, key: StoreKey, name: str, partitions: int, retain: int,
                batches: int, snapshot_every: int = 3, log: str = "log", from_model: bool = False,
                interval_ms: int = 0, pin: bool = True) -> None:
    repo = sim.open_repo(log)
    if repo is None:
        return
    rng = random.Random(f"{sim.seed}/{actor.name}")
    opened = repo.log.latest(key) if pin else None
    committer = committer_of(sim, actor, key, repo, retain, (opened.generation if opened else 0) if pin else None)
    query = opened.query_id if opened is not None and opened.query_id else name  # a restart keeps its query's id
    try:
        groups = GroupCommitter(committer, num_partitions=partitions)
        lives = [sim.local_dir(actor, f"p{p}") for p in range(partitions)]
        starts = [_start(sim, repo, key, f"{name}/p{p}", lives[p], p, from_model) for p in range(partitions)]
        start = min(starts) + 1
        for batch in range(start, start + batches):
            if batch > start and interval_ms:
                layout.sleep(interval_ms / 1000)
            snapshot = (batch + 1) % snapshot_every == 0
            history = repo.log.history(key)
            entries, new_ids, oldest = [], [], layout.now_ms()
            for p in range(partitions):
                pname = f"{name}/p{p}"
                executor = _Executor(sim, key, p)  # the partition's task: its host keeps what it staged
                heal_parts(repo, chains.partition_history(history, p), executor.kept, ttl_ms=sim.ttl_ms)
                executor.clear()
                model.write_dir(lives[p], model.state(pname, batch))
                tries = 1 + (rng.random() < 0.3) + (rng.random() < 0.2)  # a failed attempt; a speculative one
                chosen = rng.randrange(tries)
                for attempt in range(tries):
                    data = model.encoded(pname, batch)
                    entry = stage_changelog(repo, key, partition=p, batch_id=batch, data=data, ttl_ms=sim.ttl_ms,
                                            attempt=attempt)
                    executor.keep(entry.checkpoint_id, data)
                    if attempt == chosen:
                        entries.append(entry)
                if snapshot:
                    scratch = sim.local_dir(actor, f"scratch-{batch}-{p}", create=False)
                    DirStore().create_checkpoint(lives[p], scratch)
                    previous = chains.latest_snapshot(chains.partition_history(history, p))
                    staged = stage_snapshot(repo, key, partition=p, batch_id=batch, checkpoint_dir=scratch,
                                            previous=previous, ttl_ms=sim.ttl_ms, writer_id=actor.name)
                    shutil.rmtree(scratch, ignore_errors=True)
                    entries.append(staged.entry)
                    new_ids += staged.new_blob_ids
            groups.commit(entries, batch_id=batch, query_id=query, created_ms=oldest, new_blob_ids=new_ids)
    except (BlobstateError, OSError):
        return
    finally:
        committer.close()


class _Executor:
    """Partition ``partition``'s executor host of a partitioned store (``LocalPartition``,
    ``spark/partitioned/executor/partition.py``): it outlives every group owner (a driver killed or paused leaves its
    executors' disks) and keeps the changelogs its tasks staged (``pending/``) until the next batch's task, which heals
    the committed ones gc took (``blobstate.commit.parts.heal_parts``) and then drops them all."""

    def __init__(self, sim: Stage, key: StoreKey, partition: int) -> None:
        self.pending = os.path.join(sim.base, "executors", key.store, f"p{partition}", "pending")
        os.makedirs(self.pending, exist_ok=True)

    def keep(self, part_id: str, data: bytes) -> None:
        with open(os.path.join(self.pending, part_id), "wb") as fh:
            fh.write(data)

    def kept(self, record: Checkpoint) -> bytes | None:
        try:
            with open(os.path.join(self.pending, record.checkpoint_id), "rb") as fh:
                data = fh.read()
        except OSError:
            return None
        ok = len(data) == record.changelog_size and crc32c_bytes(data) == record.changelog_crc32c
        return data if ok else None

    def clear(self) -> None:
        for name in os.listdir(self.pending):
            os.remove(os.path.join(self.pending, name))


def gc(sim: Stage, actor: Actor, *, runs: int, gap_ms: int, log: str = "log") -> None:
    repo = sim.open_repo(log)
    if repo is not None:
        gc_runs(sim, actor, repo, runs=runs, gap_ms=gap_ms)


def gc_runs(sim: Stage, actor: Actor, repo: Repository, *, runs: int, gap_ms: int) -> None:
    """``runs`` gc runs of every store of ``repo``, ``gap_ms`` apart, from ``actor``'s host."""
    base = sim.local_dir(actor, "work-base")
    for run in range(runs):
        if run:
            layout.sleep(gap_ms / 1000)
        for key in repo.log.keys():
            try:
                collect(repo, key, now_ms=layout.now_ms(), ttl_ms=sim.ttl_ms, work_base=base)
            except BlobstateError:
                continue


def restorer(sim: Stage, actor: Actor, *, cleanup: bool, log: str = "log") -> None:
    repo = sim.open_repo(log)
    if repo is None:
        return
    for key, info in sorted(sim.stores.items()):
        for p in range(info.partitions) if info.partitions else [None]:
            dest = sim.local_dir(actor, f"{key.store}-{p}", create=False)
            try:
                restore_latest(sim, repo, key, info.name if p is None else f"{info.name}/p{p}", dest, partition=p)
            except (IntegrityError, NothingToRestore, OSError):
                continue  # the invariants judge whether the store may be unrestorable now
        if cleanup:
            try:
                cleanup_after_restore(repo, key, sim.work_dir(actor, key, info.retain))
            except (BlobstateError, OSError):
                continue


def recoverer(sim: Stage, actor: Actor, *, log: str = "log") -> None:
    repo = sim.open_repo(log)
    if repo is None:
        return
    for key, wd, retain in sim.orphaned_work_dirs():
        try:
            with StoreSession(key, wd) as session:
                recover(session, repo, retain=retain)
        except (BlobstateError, OSError):
            continue
