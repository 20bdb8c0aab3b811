"""The partitioning a partitioned store's group records carry: the key columns and their Spark types, in order.

Spark's hash (``pmod(hash(cols...), N)``) depends on the number of partitions, the key columns, their order and their
types; a restart with any of them changed would send keys to partitions whose state does not hold them. The number
is checked by ``PartitionCountError``; the columns and types here, the same way (exit code 2, nothing changed).
"""

from __future__ import annotations

from blobstate.errors import PartitionCountError
from blobstate.model.records import Checkpoint


class PartitioningError(PartitionCountError):
    """A partitioned store is opened (or fed a batch) with other key columns, in another order or of other Spark
    types than its group checkpoints record (exit code 2): Spark's hash would send keys to partitions whose state
    does not hold them. Nothing is changed."""


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
