"""``ValueState``, ``ListState`` and ``MapState`` with Spark's Python methods, names and return shapes, over the
partition's store (local calls: no socket, no JVM).

Shapes, as pyspark 4's clients return them in both flavours (pandas and rows): ``ValueState.get()`` a plain tuple
or None; ``ListState.get()`` an iterator of plain tuples (empty when there is no list); ``MapState.getValue(k)``
a ``Row`` (Spark returns the unpickled row) or None; ``MapState.iterator()`` ``(key tuple, value tuple)`` pairs,
``keys()``/``values()`` tuples, in the user key's order. Values are tuples (or Rows) of the schema's fields;
numpy scalars are accepted as Spark's client normalises them.

Every call acts on the current grouping key (Spark's implicit key), which the runner sets around each
``handleInputRows``/``handleExpiredTimer``/``handleInitialState`` call. With a TTL a value is invisible from the
batch whose processing time reaches its expiry, and ``sweep`` removes it and its index entry in that batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor import codec
from blobstate.spark.processor.codec import KeyCodec, ValueCodec
from blobstate.spark.processor.metadata import Variable
from blobstate.spark.processor.rows import row_class
from blobstate.spark.processor.store import MAP, VALUES, Store, space
from blobstate.spark.processor.ttl import TtlIndex, expired, expiry


class Context(Protocol):
    """What a state variable needs of the runtime: the store, the batch's processing time, the current key."""

    store: Store
    processing_time_ms: int
    key_codec: KeyCodec

    def grouping_key(self) -> bytes: ...


class _Variable:
    def __init__(self, ctx: Context, info: Variable) -> None:
        self._ctx = ctx
        self.name = info.name
        self._bind(info)

    def _bind(self, info: Variable) -> None:
        """Use the recorded ``info`` (its number and schema versions, known once ``init`` is reconciled)."""
        self.info = info
        self._codec = ValueCodec(info.schemas, what=f"state variable {info.name!r}")
        self._ttl = info.ttl_ms
        self._values = space(VALUES, info.vid)
        self._index = TtlIndex(self._ctx.store, info.vid)

    def _expiry(self) -> int | None:
        return expiry(self._ctx.processing_time_ms, self._ttl)

    def _live(self, arr: list[Any]) -> bool:
        return not expired(arr[1], self._ctx.processing_time_ms)

    def sweep(self) -> int:
        """Remove what expired by this batch's processing time (through the index); the number of values removed."""
        removed = 0
        for exp, element in self._index.due(self._ctx.processing_time_ms):
            removed += self._expire(exp, element)
        return removed

    def next_expiry(self) -> int | None:
        """The earliest TTL expiry of this variable's values (ms), None when none expires."""
        return self._index.earliest()

    def _expire(self, exp: int, element: bytes) -> int:
        raise NotImplementedError


class ValueState(_Variable):
    """One value per grouping key: ``exists``, ``get``, ``update``, ``clear``."""

    def _load(self, key: bytes) -> list[Any] | None:
        raw = self._ctx.store.get(key)
        return None if raw is None else codec.decode(raw)

    def exists(self) -> bool:
        """Whether the key has a (live) value."""
        arr = self._load(self._values + self._ctx.grouping_key())
        return arr is not None and self._live(arr)

    def get(self) -> tuple | None:
        """The value as a tuple of the schema's fields, or None."""
        arr = self._load(self._values + self._ctx.grouping_key())
        return None if arr is None or not self._live(arr) else self._codec.read(arr)

    def update(self, newValue: Any) -> None:  # noqa: N803 (Spark's argument name)
        """Set the value (a tuple of the schema's fields); with a TTL its expiry restarts now."""
        gkey = self._ctx.grouping_key()
        key = self._values + gkey
        exp = self._expiry()
        stored = self._codec.stored(newValue, exp)
        old = self._load(key)
        self._index.move(gkey, None if old is None else old[1], exp)
        self._ctx.store.put(key, codec.encode(stored))

    def clear(self) -> None:
        """Remove the value."""
        gkey = self._ctx.grouping_key()
        key = self._values + gkey
        old = self._load(key)
        if old is not None:
            self._index.move(gkey, old[1], None)
            self._ctx.store.delete(key)

    def _expire(self, exp: int, element: bytes) -> int:
        key = self._values + element
        arr = self._load(key)
        self._index.move(element, exp, None)
        if arr is not None and arr[1] == exp:
            self._ctx.store.delete(key)
            return 1
        return 0


class ListState(_Variable):
    """A list per grouping key: ``exists``, ``get``, ``put``, ``appendValue``, ``appendList``, ``clear``; with a
    TTL each element expires on its own (``put`` sets all, an append the appended ones)."""

    def _elements(self, key: bytes) -> list[list[Any]]:
        raw = self._ctx.store.get(key)
        return [] if raw is None else codec.decode(raw)

    def exists(self) -> bool:
        """Whether the key's list has a live element."""
        return any(self._live(e) for e in self._elements(self._values + self._ctx.grouping_key()))

    def get(self) -> Iterator[tuple]:
        """The live elements, in order, as tuples (an empty iterator when none)."""
        elements = self._elements(self._values + self._ctx.grouping_key())
        return iter([self._codec.read(e) for e in elements if self._live(e)])

    def put(self, newState: Iterable[Any]) -> None:  # noqa: N803
        """Replace the list with ``newState`` (non-empty, as Spark requires)."""
        self._write(self._new(newState, "put"), keep=False)

    def appendValue(self, newState: Any) -> None:  # noqa: N802, N803
        """Append one element."""
        self._write([self._codec.stored(newState, self._expiry())], keep=True)

    def appendList(self, newState: Iterable[Any]) -> None:  # noqa: N802, N803
        """Append the elements of ``newState`` (non-empty)."""
        self._write(self._new(newState, "appendList"), keep=True)

    def clear(self) -> None:
        """Remove the list."""
        self._write([], keep=False)

    def _new(self, values: Iterable[Any], call: str) -> list[list[Any]]:
        if values is None or isinstance(values, str | bytes | tuple):
            raise StateVariableError(f"state variable {self.name!r}: {call} takes a list of values")
        exp = self._expiry()
        stored = [self._codec.stored(v, exp) for v in values]
        if not stored:
            raise StateVariableError(f"state variable {self.name!r}: {call} with an empty list (Spark refuses "
                                     "it: use clear())")
        return stored

    def _write(self, new: list[list[Any]], *, keep: bool) -> None:
        gkey = self._ctx.grouping_key()
        key = self._values + gkey
        old = self._elements(key)
        elements = [e for e in old if self._live(e)] + new if keep else new
        self._store(gkey, key, old, _earliest(old), elements)

    def _store(self, gkey: bytes, key: bytes, old: list[list[Any]], old_min: int | None,
               elements: list[list[Any]]) -> None:
        self._index.move(gkey, old_min, _earliest(elements))
        if elements:
            self._ctx.store.put(key, codec.encode(elements))
        elif old:
            self._ctx.store.delete(key)

    def _expire(self, exp: int, element: bytes) -> int:
        key = self._values + element
        old = self._elements(key)
        live = [e for e in old if self._live(e)]
        old_min = _earliest(old)
        if old_min != exp:  # an entry the list no longer matches: drop it, keep the list's own
            self._index.move(element, exp, None)
        self._store(element, key, old, old_min, live)
        return len(old) - len(live)


def _earliest(elements: list[list[Any]]) -> int | None:
    expiries = [e[1] for e in elements if e[1] is not None]
    return min(expiries) if expiries else None


class MapState(_Variable):
    """A map per grouping key, one record per user key: ``exists``, ``getValue``, ``containsKey``,
    ``updateValue``, ``iterator``, ``keys``, ``values``, ``removeKey``, ``clear``; with a TTL each user key
    expires on its own."""

    def _bind(self, info: Variable) -> None:
        super()._bind(info)
        assert info.user_key is not None
        self._entries = space(MAP, info.vid)
        self._user_key = KeyCodec(info.user_key, what=f"state variable {info.name!r} user key")
        self._row = row_class(self._codec.schema.names)

    def _key(self, user_key: Any) -> tuple[bytes, bytes]:
        if not isinstance(user_key, tuple | list):
            raise StateVariableError(f"state variable {self.name!r}: a user key is a tuple of "
                                     f"({self._user_key.schema.ddl()}), not {type(user_key).__name__}")
        group = self._entries + self._ctx.grouping_key()
        return group, group + self._user_key.encode(user_key)

    def _load(self, key: bytes) -> list[Any] | None:
        raw = self._ctx.store.get(key)
        return None if raw is None else codec.decode(raw)

    def getValue(self, key: Any) -> tuple | None:  # noqa: N802
        """The value of user key ``key`` as a Row, or None."""
        arr = self._load(self._key(key)[1])
        return None if arr is None or not self._live(arr) else self._row(*self._codec.read(arr))

    def containsKey(self, key: Any) -> bool:  # noqa: N802
        arr = self._load(self._key(key)[1])
        return arr is not None and self._live(arr)

    def updateValue(self, key: Any, value: Any) -> None:  # noqa: N802
        """Set user key ``key`` to ``value``; with a TTL its expiry restarts now."""
        group, entry = self._key(key)
        exp = self._expiry()
        stored = self._codec.stored(value, exp)
        old = self._load(entry)
        self._index.move(entry[len(self._entries):], None if old is None else old[1], exp)
        self._ctx.store.put(entry, codec.encode(stored), group)

    def _items(self) -> Iterator[tuple[tuple, list[Any]]]:
        group = self._entries + self._ctx.grouping_key()
        for key, raw in list(self._ctx.store.scan(group)):
            arr = codec.decode(raw)
            if self._live(arr):
                yield self._user_key.decode(key, len(group))[0], arr

    def iterator(self) -> Iterator[tuple[tuple, tuple]]:
        """``(user key, value)`` tuples of the live entries, in user key order."""
        return iter([(k, self._codec.read(arr)) for k, arr in self._items()])

    def keys(self) -> Iterator[tuple]:
        return iter([k for k, _ in self._items()])

    def values(self) -> Iterator[tuple]:
        return iter([self._codec.read(arr) for _, arr in self._items()])

    def exists(self) -> bool:
        """Whether the key's map has a live entry."""
        return next(self._items(), None) is not None

    def removeKey(self, key: Any) -> None:  # noqa: N802
        group, entry = self._key(key)
        self._remove(group, entry)

    def clear(self) -> None:
        """Remove every entry of the key's map."""
        group = self._entries + self._ctx.grouping_key()
        for entry, _ in list(self._ctx.store.scan(group)):
            self._remove(group, entry)

    def _remove(self, group: bytes, entry: bytes) -> None:
        old = self._load(entry)
        if old is not None:
            self._index.move(entry[len(self._entries):], old[1], None)
            self._ctx.store.delete(entry, group)

    def _expire(self, exp: int, element: bytes) -> int:
        entry = self._entries + element
        _, end = self._ctx.key_codec.decode(element)
        group = self._entries + element[:end]
        arr = self._load(entry)
        self._index.move(element, exp, None)
        if arr is not None and arr[1] == exp:
            self._ctx.store.delete(entry, group)
            return 1
        return 0


KIND_CLASSES: dict[str, type[_Variable]] = {"value": ValueState, "list": ListState, "map": MapState}
