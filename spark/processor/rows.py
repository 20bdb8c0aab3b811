"""Row objects as the rows flavour hands them to a processor: pyspark's ``Row`` (a tuple with field names) when
pyspark is installed, else a tuple subclass with the same ``asDict``/attribute access, so the runtime runs without
pyspark."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class _PlainRow(tuple):
    """A tuple with field names (``__fields__``), attribute access and ``asDict``: pyspark's ``Row`` contract."""

    __fields__: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self.__fields__.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def asDict(self, recursive: bool = False) -> dict[str, Any]:  # noqa: N802 (pyspark's name)
        return dict(zip(self.__fields__, self, strict=True))


def row_class(names: Sequence[str]) -> Callable[..., tuple]:
    """A constructor ``make(*values)`` of rows with field ``names``."""
    try:
        from pyspark.sql import Row
    except ImportError:  # the runtime needs no pyspark; the rows keep Row's contract
        cls = type("Row", (_PlainRow,), {"__fields__": tuple(names)})
        return lambda *values: cls(values)
    return Row(*names)


def as_dict(row: Any, names: Sequence[str]) -> dict[str, Any]:
    """An output row as ``{name: value}``: a Row (or anything with ``asDict``) by its names, a plain tuple by
    position, a dict as is."""
    if isinstance(row, dict):
        return row
    to_dict = getattr(row, "asDict", None)
    if to_dict is not None:
        return to_dict()
    return dict(zip(names, row, strict=True))
