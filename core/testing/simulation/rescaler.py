"""The rescale actor: an offline re-partitioning of a committed group into a new store key (``blobstate spark
rescale``), through the real code path that does not need Spark.

``blobstate.spark.rescale`` is ``read_state``, a key mapping, ``write_state``; Spark only moves rows between them.
The actor runs the rest as the driver and its tasks would, with the simulated store and log:

1. ``blobstate.spark.data.rescale.source_chains``: the source group record of the batch rescaled (the batch the first
   run of the same command chose: ``--batch B``, or Spark's last commit in the checkpoint location, which do not
   move between reruns) and each old partition's chain up to it;
2. the destination's committer opened in the work directory of the host the run is on (its journal recovered: a
   run killed before its append is aborted there, one killed after it finished) and
   ``blobstate.spark.data.write.open_destination``: the destination must be empty, or hold exactly this rescale
   (``StateAlreadyWritten``, the ``RescaleAlreadyCommitted`` of the Spark API: its TTLs removed as a new host
   would); the generation pinned;
3. every old partition's chain restored with the real restore (``read_state``'s task) and each key mapped to its
   new partition (``model.new_partition``, pure as ``key_of`` and Spark's hash are);
4. each new partition written as a directory and staged as a snapshot of the batch with a TTL
   (``blobstate.worker.stage_snapshot``, ``write_state``'s task; the actor keeps nothing to heal from, as the
   executors' scratch copies are gone once their task ended);
5. ``blobstate.spark.data.write.commit_written``: the answers checked, then one group record of the new
   partitions' snapshots committed through the one commit engine.

The outcome of every run is kept (``Stage.rescale_outcomes``); the run's end reruns the command once more, as an
operator would, and the invariants judge it (``blobstate.testing.simulation.runner``).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from blobstate.errors import BlobstateError, IntegrityError, NothingToRestore
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugins.dir_store import DirStore
from blobstate.spark.data.executor.tasks import RepositoryRef, Written
from blobstate.spark.data.rescale import source_chains
from blobstate.spark.data.write import Target, commit_written, open_destination
from blobstate.spark.errors import DestinationNotEmpty, StateAlreadyWritten, StateWriteRefused
from blobstate.testing.simulation.actors import committer_of, restore_into
from blobstate.testing.simulation.model import new_partition, write_dir
from blobstate.worker import stage_snapshot

if TYPE_CHECKING:
    from blobstate.repository.repo import Repository
    from blobstate.testing.simulation.scheduler import Actor
    from blobstate.testing.simulation.stage import Stage

#: a run's outcomes: committed, already (the destination holds this rescale), nothing (no source state of the
#: batch), unreadable (the source's chain does not restore: an integrity error), refused (the destination holds
#: something else, or rows the write refused), or failed: <error>
OUTCOMES = ("committed", "already", "nothing", "unreadable", "refused")


def rescaler(sim: Stage, actor: Actor, *, source: StoreKey, target: StoreKey, partitions: int, retain: int,
             host: str | None = None, log: str = "log") -> None:
    """One run of the rescale of ``source`` into ``target`` (``partitions`` new partitions, ``retain``) on
    ``host`` (its work directory: the host of an earlier run, or its own); its outcome is appended to
    ``sim.rescale_outcomes``."""
    repo = sim.open_repo(log)
    if repo is None:
        return
    sim.rescale_sources[actor.name] = source
    sim.rescale_outcomes.append((actor.name, rescale_once(sim, actor, repo, source=source, target=target,
                                                          partitions=partitions, retain=retain, host=host)))


def rescale_once(sim: Stage, actor: Actor, repo: Repository, *, source: StoreKey, target: StoreKey,
                 partitions: int, retain: int, host: str | None) -> str:
    """Steps 1-5 of the module docstring; returns the outcome (``OUTCOMES``, or ``failed: <error>``)."""
    try:
        record, chains = source_chains(repo.log.history(source), source, batch_id=sim.rescale_batch.get(target))
    except NothingToRestore:
        return "nothing"
    except BlobstateError as exc:
        return f"failed: {type(exc).__name__}"
    assert record.batch_id is not None
    sim.rescale_batch.setdefault(target, record.batch_id)  # the same command reruns the same batch
    try:
        committer = committer_of(sim, actor, target, repo, retain, host=host)
    except (BlobstateError, OSError) as exc:
        return f"failed: {type(exc).__name__}"
    spec = Target(RepositoryRef(repo.url), target, partitions, ("key",), (("key", "string"),), record.batch_id,
                  record.query_id, ttl_ms=sim.ttl_ms, retain=retain, scratch="blobstate-rescale-write")
    try:
        open_destination(committer, spec, "rescale")
        rows: list[dict[str, str]] = [{} for _ in range(partitions)]
        problems: list[list[str]] = [[] for _ in range(partitions)]
        read = 0
        for p, chain in sorted(chains.items()):
            scratch = sim.local_dir(actor, f"read-{target.store}-p{p}", create=False)  # read_state's task's
            values = restore_into(repo, chain, scratch)
            shutil.rmtree(scratch, ignore_errors=True)
            for key, value in values.items():
                read += 1
                q = new_partition(key, partitions)
                if key in rows[q]:
                    problems[q].append(f"key {key!r} arrives twice")
                rows[q][key] = value
        written = [_write(sim, actor, repo, target, spec.batch_id, q, rows[q], problems[q])
                   for q in range(partitions)]
        commit_written(committer, written, spec, what="rescale", expect_keys=read)
        return "committed"
    except StateAlreadyWritten:
        return "already"
    except (DestinationNotEmpty, StateWriteRefused):
        return "refused"
    except IntegrityError:
        return "unreadable"
    except (BlobstateError, OSError) as exc:
        return f"failed: {type(exc).__name__}"
    finally:
        committer.close()


def _write(sim: Stage, actor: Actor, repo: Repository, target: StoreKey, batch: int, q: int,
           values: dict[str, str], problems: list[str]) -> Written:
    """New partition ``q`` written and staged as a snapshot of ``batch`` (``write_state``'s task)."""
    created = layout.now_ms()
    if problems:
        return Written(q, 0, len(values), None, created, tuple(problems[:5]), True)
    live = sim.local_dir(actor, f"write-{target.store}-p{q}")
    scratch = sim.local_dir(actor, f"write-{target.store}-p{q}-checkpoint", create=False)
    try:
        write_dir(live, values)
        DirStore().create_checkpoint(live, scratch)
        staged = stage_snapshot(repo, target, partition=q, batch_id=batch, checkpoint_dir=scratch, previous=None,
                                ttl_ms=sim.ttl_ms, writer_id=f"write-partition-{q}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)
    return Written(q, 0, len(values), staged, created)


__all__ = ["OUTCOMES", "rescale_once", "rescaler"]
