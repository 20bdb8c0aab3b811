"""A partition's input rows grouped by key with Arrow kernels, and the per-key inputs a processor iterates.

``group_by_key`` sorts the rows by the key columns (``pyarrow.compute.sort_indices``, stable: a key's rows keep
their arrival order), finds where the key changes by comparing each key column with itself shifted by one row (no
Python call per row) and reads one Python key tuple per group. The inputs handed to ``handleInputRows`` are built
from those slices only when the processor iterates them: the pandas flavour's DataFrames are the groups of one
DataFrame converted once per batch, cut by pandas' group splitter (at most ``max_records`` rows each, a fresh
RangeIndex from 0, as Spark chunks by ``spark.sql.execution.arrow.maxRecordsPerBatch``); the rows flavour's
``Row``s are made from the batch's columns converted to Python once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.rows import row_class


@dataclass
class KeyGroups:
    """Rows sorted by key (``table``), each group's ``[starts[i], ends[i])`` row range and its ``keys[i]`` tuple."""

    table: Any
    starts: list[int]
    ends: list[int]
    keys: list[tuple]

    def __len__(self) -> int:
        return len(self.keys)


def as_table(data: Any) -> Any:
    """A ``pyarrow.Table`` of ``data`` (a Table, a RecordBatch or an iterable of RecordBatches; None: no rows)."""
    import pyarrow as pa

    if data is None:
        return None
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    batches = list(data)
    return pa.Table.from_batches(batches) if batches else None


def group_by_key(table: Any, key_columns: Sequence[str]) -> KeyGroups:
    """``table``'s rows grouped by ``key_columns`` (nulls form their own group, last)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    missing = [c for c in key_columns if c not in table.column_names]
    if missing:
        raise StateVariableError(f"key columns {missing} are not among the input's columns {table.column_names}")
    n = table.num_rows
    if n == 0:
        return KeyGroups(table, [], [], [])
    plain = table
    for name in key_columns:  # sort and compare dictionary-encoded keys by their values
        column = table.column(name)
        if pa.types.is_dictionary(column.type):
            plain = plain.set_column(plain.schema.get_field_index(name), name, column.cast(column.type.value_type))
    order = pc.sort_indices(plain, sort_keys=[(c, "ascending") for c in key_columns])
    ordered = plain.take(order)
    changed = np.zeros(n - 1, dtype=bool)
    key_arrays = [ordered.column(c).combine_chunks() for c in key_columns]
    for arr in key_arrays:
        if n == 1:
            break
        head, tail = arr.slice(0, n - 1), arr.slice(1)
        differ = pc.fill_null(pc.not_equal(head, tail), False)
        null_edge = pc.xor(pc.is_null(head), pc.is_null(tail))
        changed |= pc.or_(differ, null_edge).to_numpy(zero_copy_only=False)
    starts = np.concatenate(([0], np.flatnonzero(changed) + 1))
    ends = np.append(starts[1:], n)
    first = pa.array(starts)
    columns = [arr.take(first).to_pylist() for arr in key_arrays]
    return KeyGroups(ordered, starts.tolist(), ends.tolist(), list(zip(*columns, strict=True)))


class PandasInputs:
    """Per-key ``Iterator[pandas.DataFrame]`` over a ``KeyGroups`` (the batch converted to pandas once).

    The frames are cut by pandas' own group splitter (``DataFrame.groupby`` over the group numbers, iterated in
    key order: about a third of the cost of an ``iloc`` slice and a shallow copy per key), each given a fresh
    ``RangeIndex`` from 0 as Spark's are; a group longer than ``max_records`` rows is cut further into chunks. A
    group asked for out of key order (a processor that keeps a key's iterator for later) is sliced directly."""

    def __init__(self, groups: KeyGroups, max_records: int) -> None:
        self._frame: Any = None  # converted when a processor first iterates its rows (some never do)
        self._groups = groups
        self._max = max(1, int(max_records))
        self._indexes: dict[int, Any] = {}  # RangeIndex by length: immutable, shared by the frames of that length
        self._split: Iterator[tuple[Any, Any]] | None = None
        self._next = 0  # the group the splitter yields next

    def _index(self, n: int) -> Any:
        import pandas as pd

        index = self._indexes.get(n)
        if index is None:
            index = self._indexes[n] = pd.RangeIndex(n)
        return index

    def _group(self, i: int) -> Any:
        """Group ``i``'s rows as one DataFrame of its own (its index not yet reset)."""
        import numpy as np

        groups = self._groups
        if self._frame is None:
            self._frame = groups.table.to_pandas()
            lengths = np.asarray(groups.ends) - np.asarray(groups.starts)
            numbers = np.repeat(np.arange(len(groups), dtype=np.int64), lengths)
            self._split = iter(self._frame.groupby(numbers, sort=False))
        if i >= self._next:
            assert self._split is not None
            while self._next <= i:  # groups a processor never iterated are passed over
                _, frame = next(self._split)
                self._next += 1
            return frame
        return self._frame.iloc[groups.starts[i]:groups.ends[i]].copy(deep=False)

    def frames(self, i: int) -> Iterator[Any]:
        """The DataFrames of group ``i`` (built as they are iterated)."""
        frame = self._group(i)
        n = len(frame)
        if n <= self._max:
            frame.index = self._index(n)
            yield frame
            return
        for lo in range(0, n, self._max):
            hi = min(n, lo + self._max)
            chunk = frame.iloc[lo:hi].copy(deep=False)  # a frame of its own: no chained-assignment warnings
            chunk.index = self._index(hi - lo)
            yield chunk


class RowInputs:
    """Per-key ``Iterator[Row]`` over a ``KeyGroups`` (the batch's columns converted to Python once, when a
    processor first iterates its rows)."""

    def __init__(self, groups: KeyGroups) -> None:
        self._columns: list[list[Any]] | None = None
        self._make = row_class(groups.table.column_names)
        self._groups = groups

    def rows(self, i: int) -> Iterator[Any]:
        if self._columns is None:
            table = self._groups.table
            self._columns = [table.column(j).to_pylist() for j in range(table.num_columns)]
        start, end = self._groups.starts[i], self._groups.ends[i]
        make = self._make
        for j in range(start, end):
            yield make(*(column[j] for column in self._columns))
