"""What a processor emits, gathered into one Arrow table of the output schema.

Pandas flavour: each emitted item must be a ``pandas.DataFrame`` (Spark refuses anything else); its columns are
matched to the output schema by name when they are all strings, else by position (Spark's
``assignColumnsByName``). The frames are gathered a few thousand at a time (a chunk) and converted with Arrow's
checked casts (converting each frame to Arrow alone costs hundreds of microseconds). A chunk is joined as
``pandas.concat`` joins it; when every frame of the chunk has exactly the output's columns, in order, with the same
NumPy dtypes (the common case: a processor emitting one shape), the join is a ``numpy.concatenate`` per column of
the arrays taken from each frame as it is emitted, which gives the same frame as ``pandas.concat`` for a fraction of
its cost (tens of microseconds a frame). Rows flavour: each item is a ``Row`` (by its field names), a dict, or a
plain tuple (by position).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.rows import as_dict
from blobstate.spark.processor.schema import Schema

CHUNK_FRAMES = 4096


class OutputCollector:
    """Collects the emitted items of one batch (``add``) and returns them as a ``pyarrow.Table`` (``table``)."""

    def __init__(self, schema: Schema, flavour: str) -> None:
        self.schema = schema
        self.flavour = flavour
        self._arrow = schema.arrow()
        self._names = list(schema.names)
        self._frames: list[Any] = []
        #: per frame of the chunk, its columns' arrays while every frame so far has the fast shape (else None)
        self._columns: list[list[Any]] | None = []
        self._dtypes: list[Any] | None = None  # the chunk's NumPy dtypes, per output column
        self._rows: list[dict[str, Any]] = []
        self._tables: list[Any] = []
        self.rows = 0

    def add(self, emitted: Iterable[Any] | None, *, where: str) -> None:
        """Take every item of ``emitted`` (what ``handleInputRows`` & co. returned; None: nothing)."""
        if emitted is None:
            return
        if self.flavour == "pandas":
            import pandas as pd

            for frame in emitted:
                if not isinstance(frame, pd.DataFrame):
                    raise StateVariableError(f"{where} must yield pandas.DataFrames in the pandas flavour, not "
                                             f"{type(frame).__name__}")
                if len(frame):
                    self._frames.append(self._aligned(frame, where))
                    if self._columns is not None:
                        self._take_columns(frame)
                    if len(self._frames) >= CHUNK_FRAMES:
                        self._flush()
        else:
            names = self._names
            for row in emitted:
                self._rows.append(as_dict(row, names))

    def _aligned(self, frame: Any, where: str) -> Any:
        columns = frame.columns.tolist()
        if columns == self._names:  # the common case, checked cheaply
            return frame
        if all(isinstance(c, str) for c in columns):
            missing = [n for n in self._names if n not in frame.columns]
            if missing:
                raise StateVariableError(f"{where} emitted a DataFrame without the output column(s) {missing} "
                                         f"(output schema: {self.schema.ddl()})")
            return frame
        if len(frame.columns) != len(self._names):
            raise StateVariableError(f"{where} emitted {len(frame.columns)} unnamed columns for an output schema "
                                     f"of {len(self._names)} ({self.schema.ddl()})")
        return frame.set_axis(self._names, axis=1)

    def _flush(self) -> None:
        import pandas as pd
        import pyarrow as pa

        if not self._frames:
            return
        if self._columns:
            import numpy as np

            frame = pd.DataFrame({name: np.concatenate([arrays[j] for arrays in self._columns])
                                  for j, name in enumerate(self._names)}, copy=False)
        else:
            frame = pd.concat(self._frames, ignore_index=True)[self._names]
        self._frames, self._columns, self._dtypes = [], [], None
        try:
            self._tables.append(pa.Table.from_pandas(frame, schema=self._arrow, preserve_index=False, safe=True))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise StateVariableError(f"emitted rows do not fit the output schema ({self.schema.ddl()}): {exc}") \
                from None

    def _take_columns(self, frame: Any) -> None:
        """Keep ``frame``'s column arrays for the chunk's fast join, or give the fast join up for this chunk (a
        frame with other columns, another order, an extension dtype or other dtypes than the chunk's first).

        The arrays are read without building a ``Series`` per column (``DataFrame._get_column_array``, pandas'
        own accessor behind ``items``: a few µs a frame where ``items`` costs about a hundred); a pandas without
        it takes the ``items`` path. A NumPy dtype is an instance of ``numpy.dtype`` (NumPy 2 gives each its own
        subclass, so a test of ``type(dtype) is numpy.dtype`` never holds)."""
        import numpy as np

        names = self._names
        if frame.columns.tolist() != names:  # another order, or matched by name: pandas.concat's path
            self._columns = None
            return
        column_array = getattr(frame, "_get_column_array", None)
        if column_array is not None:
            arrays = [column_array(j) for j in range(len(names))]
        else:  # pragma: no cover - pandas without the accessor
            arrays = [column.values for _, column in frame.items()]
        dtypes = [getattr(array, "dtype", None) for array in arrays]
        if (not all(isinstance(a, np.ndarray) for a in arrays)
                or (self._dtypes is not None and dtypes != self._dtypes)):
            self._columns = None
            return
        self._dtypes = dtypes
        self._columns.append(arrays)  # type: ignore[union-attr]

    def table(self) -> Any:
        """Everything collected, as one ``pyarrow.Table`` of the output schema."""
        import pyarrow as pa

        if self.flavour == "pandas":
            self._flush()
        elif self._rows:
            try:
                self._tables.append(pa.Table.from_pylist(self._rows, schema=self._arrow))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
                raise StateVariableError(f"emitted rows do not fit the output schema ({self.schema.ddl()}): {exc}") \
                    from None
            self._rows = []
        if not self._tables:
            return self._arrow.empty_table()
        out = pa.concat_tables(self._tables)
        self._tables = [out]
        self.rows = out.num_rows
        return out
