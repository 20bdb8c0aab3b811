"""The partitioning a partitioned store's group records carry: the key columns and their Spark types, in order; and
the plan of every partition of a group against Spark's checkpoint location (``align_partitions``).

Spark's hash (``pmod(hash(cols...), N)``) depends on the number of partitions, the key columns, their order and their
types; a restart with any of them changed would send keys to partitions whose state does not hold them. The number
is checked by ``PartitionCountError``; the columns and types here, the same way (``PartitioningError``, exit code 2,
nothing changed).
"""

from __future__ import annotations

from collections.abc import Sequence

from blobstate.commit.group import check_partition_count
from blobstate.model.chain import partition_history
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.model.regroup import current_partitioning
from blobstate.spark.committed.alignment import AlignmentPlan, plan_alignment
from blobstate.spark.errors import PartitioningError


def recorded_partitioning(history: list[Checkpoint]) -> tuple[tuple[str, str], ...]:
    """The key columns (``(name, Spark type)``) the newest group record of ``history`` that names them records."""
    return next((cp.key_columns for cp in reversed(history) if cp.is_group and cp.key_columns), ())


def check_partitioning(recorded: tuple[tuple[str, str], ...], key_cols: list[str], types: list[str] | None,
                       what: str) -> None:
    """``PartitioningError`` when ``key_cols`` (with ``types``, their Spark types, when known) differ from the
    ``recorded`` key columns (nothing recorded: nothing to check)."""
    if not recorded:
        return
    names = [n for n, _ in recorded]
    given = list(zip(key_cols, types, strict=True)) if types is not None else None
    if names != list(key_cols) or (given is not None and given != list(recorded)):
        shown = ", ".join(f"{n} {t}" for n, t in recorded)
        raise PartitioningError(
            f"{what} is partitioned by ({shown}), but it was opened with key_cols={list(key_cols)}"
            f"{'' if types is None else f' of types {types}'}: Spark's hash depends on the key columns, their order "
            f"and their types, so keys would land in partitions whose state does not hold them. Open it with "
            f"key_cols={names} (of those types), or re-partition the state offline first; nothing was changed")


def align_partitions(history: Sequence[Checkpoint], key: StoreKey, *, num_partitions: int, key_cols: Sequence[str],
                     last_committed: int | None, last_planned: int | None, query_id: str | None, location: str,
                     repo_url: str) -> list[AlignmentPlan]:
    """The plan of every partition of the partitioned store ``key`` (its group records ``history``) against Spark's
    checkpoint location, as ``plan_alignment``, after its partition count and key columns are checked: what the
    partitioned driver's Open door plans from its pinned view (Spark-free: the simulator's adopters run it too).
    Raises ``SparkAlignmentError``, ``PartitionCountError``, ``PartitioningError``."""
    check_partition_count(history, num_partitions, f"{key}")
    check_partitioning(recorded_partitioning(history), list(key_cols), None, f"{key}")
    current = current_partitioning(history)  # a partition number means its range in one partitioning only
    return [plan_alignment(partition_history(current, p), key, last_committed=last_committed, query_id=query_id,
                           location=location, repo_url=repo_url, last_planned=last_planned)
            for p in range(num_partitions)]


__all__ = ["align_partitions", "check_partitioning", "recorded_partitioning"]
