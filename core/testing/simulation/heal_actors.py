"""The actors of issue 39's heal cases, where a copy, a lost host or a cache could hide a loss from the heal:

- ``copier``: ``blobstate copy`` of the snapshot store into a second repository (the *copy target*: a world of its
  own, reached through the same scheduler, ``target``), through the real ``blobstate.commit.copy.StoreCopier`` in
  the work directory of its own host. A scenario runs three: one that completes early, one killed at a protocol step
  after some uploads, and one rerun from another host after the killed one's TTL, beside ``target_gc``. Once a run
  copied, it checks the target as the invariants check a repository (``Checker.check``, the records it copied
  counted as completed: their objects present, every state restoring to the model; another copy's record still
  landing is that copy's to heal): a rerun that counted the killed copy's expired leftovers as present and
  appended after gc took them is case 3.
- ``target_gc``: ``blobstate gc`` of the copy target, ``runs`` times.
- ``host_loss``: the hosts of the partitioned store's executors lose their disks (every changelog their tasks kept,
  ``actors._Executor``), ``runs`` times: with the group owner paused past its TTL before its append and a gc in
  between, the double fault of case 7 (the group must be voided, never left committed and unrestorable; the
  invariants' ``lost`` finds it once a later group completed).
- ``cached_index_writer``: two processes, one after the other, of one host writing snapshots of a store of its
  own; between them the store loses the latest index (outside every API call, as a fault does), which the host
  still holds in its object cache. Once the second process has committed, the index must be back while its record
  is retained (case 12: the cache saves a read, never knowledge).

Each violation names its case (``Violation`` detail ``issue 39 case N: ...``; ``shrink.classify``).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from blobstate.commit.copy import CopyReport, StoreCopier
from blobstate.errors import BlobstateError
from blobstate.model import layout
from blobstate.model.chain import overridden_parts
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.testing.simulation import model
from blobstate.testing.simulation.actors import committer_of, gc_runs
from blobstate.testing.simulation.invariants import Checker, StoreInfo, Violation
from blobstate.testing.simulation.world import SimBlobStore, World, history_now, read_now, sim_repository

if TYPE_CHECKING:
    from blobstate.repository.repo import Repository
    from blobstate.testing.simulation.runner import Simulation
    from blobstate.testing.simulation.scheduler import Actor

TARGET_URL = "sim://copy-target"


def target(sim: Simulation) -> tuple[World, Repository]:
    """The copy target of ``sim`` (made on first use): a world of its own whose every call is a scheduling point of
    the same scheduler, and its repository (one checkpoint log, ``log``)."""
    made = getattr(sim, "_copy_target", None)
    if made is None:
        world = World(point=sim.world.point, server_clock=sim.world.server_clock)
        made = (world, sim_repository(SimBlobStore(world, TARGET_URL), "log"))
        sim._copy_target = made  # type: ignore[attr-defined]
    return made


def copier(sim: Simulation, actor: Actor, *, key: StoreKey, name: str, retain: int) -> None:
    """One ``blobstate copy`` of ``key`` (model name ``name``) into the copy target, on this actor's host; then the
    target checked (see the module docstring). Ends quietly on what a copy exits on."""
    source = sim.open_repo("log")
    if source is None:
        return
    world, dst = target(sim)
    work_dir = os.path.join(sim.base, actor.name, "work", key.store)  # its host's; its journal is the target's
    try:
        history = source.log.history(key)
        copy = StoreCopier(key, source, dst, work_dir=work_dir, ttl_ms=sim.ttl_ms, max_concurrency=1,
                           voided=overridden_parts(history))
    except (BlobstateError, OSError):
        return
    try:
        records, _, _ = copy.open(history)  # the Open door: pinned, then planned from that read
    except (BlobstateError, OSError):
        return
    if not records:
        copy.close()
        return
    actor.resources.append(copy.committer.session)  # a kill releases its lock, as the kernel does
    report = CopyReport(key)
    try:
        copy.copy(records, report)
    except (BlobstateError, OSError):
        return
    finally:
        copy.close()
    checker = Checker(world, {key: StoreInfo(name, retain)}, ["log"], completed=set(report.copied))
    try:  # what this copy committed must hold; another copy's record still landing is its own to heal
        checker.check()
    except Violation as exc:
        raise Violation(exc.kind, f"issue 39 case 3: the copy target after {actor.name}'s copy: {exc.detail}") \
            from None


def target_gc(sim: Simulation, actor: Actor, *, runs: int, gap_ms: int) -> None:
    """``blobstate gc`` of the copy target, ``runs`` times ``gap_ms`` apart, from a host of its own."""
    gc_runs(sim, actor, target(sim)[1], runs=runs, gap_ms=gap_ms)


def host_loss(sim: Simulation, actor: Actor, *, key: StoreKey, runs: int, gap_ms: int) -> None:
    """The executors' hosts of partitioned store ``key`` lose what their tasks kept, ``runs`` times ``gap_ms`` apart
    (between two scheduling points: a disk gone at once)."""
    root = os.path.join(sim.base, "executors", key.store)
    for run in range(runs):
        if run:
            layout.sleep(gap_ms / 1000)
        sim.world.point("host loss")
        for partition in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            shutil.rmtree(os.path.join(root, partition, "pending"), ignore_errors=True)
            os.makedirs(os.path.join(root, partition, "pending"), exist_ok=True)


def cached_index_writer(sim: Simulation, actor: Actor, *, key: StoreKey, name: str, retain: int, batches: int,
                        interval_ms: int = 0) -> None:
    """Two processes of one host, each committing ``batches`` snapshots of ``key`` (its states those of model
    ``name``); between them the store loses the latest index, which this host's object cache holds (see the module
    docstring). Ends quietly on what a writer exits on."""
    if sim.open_repo("log") is None:
        return
    lost: Checkpoint | None = None
    for process in range(2):
        # a process of its own: its own repository object, so its object cache is its host's alone (the actors
        # share one otherwise, and with it the cache the last writer opened)
        repo = sim_repository(sim.store, "log", sim.scenario.cipher())
        opened = repo.log.latest(key)
        live = sim.local_dir(actor, "live")
        try:
            committer = committer_of(sim, actor, key, repo, retain, opened.generation if opened else 0)
        except (BlobstateError, OSError):
            return
        try:
            first = (opened.batch_id or 0) + 1 if opened is not None else 0
            for batch in range(first, first + batches):
                if batch > first and interval_ms:
                    layout.sleep(interval_ms / 1000)
                model.write_dir(live, model.state(name, batch))
                committer.upload(committer.checkpoint(live, batch_id=batch))
                if lost is not None:
                    _check_put_back(sim, key, lost)
                    lost = None
        except (BlobstateError, OSError):
            return
        finally:
            committer.close()
        if process == 0:  # the store loses the latest index (outside every API call); this host has its bytes
            latest = history_now(sim.world, "log", key)[-1]
            sim.world.point("lose the latest index")
            sim.world.lose(latest.index_blob_id)
            lost = latest


def _check_put_back(sim: Simulation, key: StoreKey, lost: Checkpoint) -> None:
    """Case 12: the index of ``lost`` is stored again while its record is retained."""
    retained = {cp.checkpoint_id for cp in history_now(sim.world, "log", key)}
    if lost.checkpoint_id in retained and read_now(sim.world, lost.index_blob_id) is None:
        raise Violation("lost", f"issue 39 case 12: {key}: the index {lost.index_blob_id} of retained checkpoint "
                                f"{lost.checkpoint_id} is gone although this host held a verified copy in its object "
                                "cache and a process of this host committed since")


def prepare(sim: Simulation) -> None:
    """A ``Scenario.extras`` hook: nothing to set up (the copy target is made on first use, ``target``)."""


def check(sim: Simulation) -> None:
    """A ``Scenario.extras`` hook: nothing to check after every step (each actor checks what its case needs)."""


def final(sim: Simulation) -> None:
    """A ``Scenario.extras`` hook: nothing to check at the end beyond the runner's own checks."""


__all__ = ["cached_index_writer", "check", "copier", "final", "host_loss", "prepare", "target", "target_gc"]
