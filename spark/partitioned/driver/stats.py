"""What each committed batch of a partitioned state reports (``PartitionedState.batch_stats``)."""

from __future__ import annotations

from dataclasses import dataclass

from blobstate.model.records import Checkpoint, Replica
from blobstate.spark.partitioned.executor.batch_task import Prepare
from blobstate.spark.partitioned.executor.snapshot_task import SnapshotResult


@dataclass(frozen=True)
class GroupBatchStats:
    """Per committed batch: the Spark job (ms), the group commit (ms), the group's generation, partitions restored from
    the repository, files and bytes downloaded by the tasks, changelog bytes uploaded, and the partition snapshots the
    group record committed (``snapshots``; taken earlier, off the batch's path). Where the tasks ran:
    ``partitions_local`` found the copy on their host current (nothing downloaded), ``partitions_placed`` ran on the
    executor the driver preferred (``blobstate.spark.placement.coordinator``), ``executors[p]`` is where partition
    ``p``'s committed part was written (``""``: unknown), in ``task_ms[p]`` ms. A key-grouped store's
    ``key_groups`` (0: none); the batch that started a rescale at restart says from which number of partitions to
    which (``regrouped``: ``(old, new)``, None for every other batch) and where each new partition's start went
    (``phases_ms[p]``: ``(phase, ms)`` pairs, ``Prepare.phases_ms``). With ``standby=1``:
    ``standbys[p]`` is partition ``p``'s warm standby's executor (``""``: none) and ``standby_batches[p]`` the batch
    its copy was reported at (None: not warm yet), as the group record's ``replicas`` say
    (``blobstate.spark.partitioned.driver.standbys``)."""

    batch_id: int
    job_ms: float
    commit_ms: float
    generation: int
    partitions_restored: int
    files_downloaded: int
    bytes_downloaded: int
    bytes_uploaded: int
    snapshots: int = 0
    partitions_local: int = 0
    partitions_placed: int = 0
    executors: tuple[str, ...] = ()
    task_ms: tuple[float, ...] = ()
    key_groups: int = 0
    regrouped: tuple[int, int] | None = None
    phases_ms: tuple[tuple[tuple[str, float], ...], ...] = ()
    standbys: tuple[str, ...] = ()
    standby_batches: tuple[int | None, ...] = ()


def batch_stats(group: Checkpoint, accepted: list[Prepare], snapshots: list[SnapshotResult], locations: list[str],
                *, job_ms: float, commit_ms: float, key_groups: int = 0,
                regrouped: tuple[int, int] | None = None, replicas: tuple[Replica, ...] = ()) -> GroupBatchStats:
    """The stats of ``group`` (the committed record), from its ``accepted`` prepares (in partition order), the
    ``snapshots`` it committed and the ``locations`` the driver preferred (``""``: none); ``key_groups`` and
    ``regrouped`` as ``GroupBatchStats`` says; ``replicas``: the standbys the record names."""
    executors = tuple(p.task.executor for p in accepted)
    placed = sum(bool(want) and want == e for want, e in zip(locations, executors, strict=False))
    return GroupBatchStats(group.batch_id if group.batch_id is not None else -1, job_ms, commit_ms, group.generation,
                           sum(p.restored for p in accepted), sum(p.files_downloaded for p in accepted),
                           sum(p.bytes_downloaded for p in accepted), sum(p.entry.size for p in accepted),
                           len(snapshots), sum(p.local for p in accepted), placed, executors,
                           tuple(round(p.ms, 1) for p in accepted), key_groups, regrouped,
                           tuple(p.phases_ms for p in accepted) if regrouped else (),
                           standbys=tuple(r.standby for r in replicas),
                           standby_batches=tuple(r.standby_batch_id for r in replicas))
