"""The executor side of ``blobstate.spark.data.rescale`` beyond reading and writing state: every stored key turned into
the key columns Spark's hash partitions by. Spark-agnostic but for the Arrow batches it maps.

``map_keys`` runs as a ``mapInArrow`` over ``read_state``'s DataFrame (``blobstate.spark.data.read``): each row's
stored key (its ``key`` column, or its raw bytes decoded: ``blobstate.worker.entries``) goes through the user's
``key_of``, whose answer is checked against the key schema's types (``check_values``), so that Spark hashes the
columns exactly as the streaming query does; the row comes out as ``(*key columns, key, value, key_raw, value_raw,
_error)``, ``_error`` None or why the key cannot be mapped (``key_of`` raised, or returned the wrong number or
types of values). The rows then go to ``write_state``'s job (``blobstate.spark.data.write``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blobstate.worker import entries

if TYPE_CHECKING:
    import pyarrow as pa

KeyOf = Callable[[Any], Sequence[Any]]
ERROR = "_error"  # the column naming why a key cannot be mapped
#: Spark type name -> the Python types a key column of that type accepts (others are left to Spark's own check).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "long": (int,), "short": (int,), "byte": (int,), "boolean": (bool,),
    "double": (float, int), "float": (float, int), "binary": (bytes, bytearray),
}


@dataclass(frozen=True)
class KeyPlan:
    """``key_of`` and the key columns' ``fields`` (name, Spark type name, nullable) with their Arrow types."""

    key_of: KeyOf
    fields: tuple[tuple[str, str, bool], ...]
    arrow_types: tuple[Any, ...]


def check_values(values: Any, fields: Sequence[tuple[str, str, bool]]) -> str | None:
    """Why ``values`` (what ``key_of`` returned) cannot be a row of the key columns ``fields``; None when it can."""
    names = ", ".join(f[0] for f in fields)
    if not isinstance(values, tuple | list) or len(values) != len(fields):
        return f"key_of returned {values!r:.100}, not a tuple of {len(fields)} values ({names})"
    for value, (name, type_name, nullable) in zip(values, fields, strict=True):
        if value is None:
            if not nullable:
                return f"key_of returned None for the non-null column {name}"
            continue
        expected = _PYTHON_TYPES.get(type_name)
        if expected is not None and (not isinstance(value, expected) or (
                isinstance(value, bool) and bool not in expected)):
            return f"key_of returned {name}={value!r:.100}, which is not a Spark {type_name}"
    return None


def key_row(plan: KeyPlan, key: Any) -> tuple[Sequence[Any], str | None]:
    """``(key column values, None)`` for a stored ``key``, or ``(Nones, why not)``."""
    try:
        values = plan.key_of(key)
        problem = check_values(values, plan.fields)
    except Exception as exc:  # noqa: BLE001 - a user function: its failure is reported with the key
        problem = f"key_of raised {type(exc).__name__}: {str(exc)[:200]}"
    if problem is not None:
        return (None,) * len(plan.fields), f"key {key!r:.200}: {problem}"
    return values, None


def map_keys(plan: KeyPlan, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over ``read_state``'s rows: the key columns in front, ``_error`` at the end."""
    import pyarrow as pa

    for batch in batches:
        keys, raws = batch.column("key").to_pylist(), batch.column("key_raw").to_pylist()
        columns: list[list[Any]] = [[] for _ in plan.fields]
        errors: list[str | None] = []
        for key, raw in zip(keys, raws, strict=True):
            values, problem = key_row(plan, key if key is not None else entries.decode(raw))
            for column, value in zip(columns, values, strict=True):
                column.append(value)
            errors.append(problem)
        arrays = [pa.array(c, type=t) for c, t in zip(columns, plan.arrow_types, strict=True)]
        arrays += [batch.column(n) for n in ("key", "value", "key_raw", "value_raw")]
        names = [f[0] for f in plan.fields] + ["key", "value", "key_raw", "value_raw", ERROR]
        yield pa.RecordBatch.from_arrays([*arrays, pa.array(errors, type=pa.string())], names=names)


__all__ = ["ERROR", "KeyOf", "KeyPlan", "check_values", "key_row", "map_keys"]
