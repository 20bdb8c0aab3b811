"""Changelogs: one batch's writes to a RocksDB store (puts and deletes), staged, encoded as one blob, replayed.

A batch writes into ``StagedWrites``, an overlay on the open store: reads see the batch's own writes, nothing
reaches RocksDB until ``apply`` writes them all in one ``WriteBatch`` (atomic), so a batch that fails leaves no
partial writes. The same writes, encoded (``encode``), are the changelog blob of the batch's delta record; a
restore replays them in order (``replay``) on top of a snapshot. Spark's RocksDB state store changelog and
Flink's changelog state backend keep the same kind of per-batch log.

The encoding (big-endian)::

    b"BSCHLOG1"  u32 op count  then per op:  u8 op (b"P" put, b"D" delete)  key  [value, puts only]
    key / value:  u8 type (b"b" bytes, b"s" UTF-8 str, b"i" int as decimal ASCII (a sign and at most 4300 digits),
                  b"f" float64, b"t" bool)
                  u32 length  payload

Keys and values are what rocksdict stores natively: ``str``, ``bytes``, ``int``, ``float``, ``bool``. Anything
else is refused when written (``ConfigurationError``), never pickled: a changelog read back from a repository is
input like any other, and decoding it never runs code.
"""

from __future__ import annotations

import re
import struct
import sys
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any, Protocol

from blobstate.errors import ConfigurationError, CorruptIndexError

MAGIC = b"BSCHLOG1"
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")
PUT, DELETE = b"P", b"D"
#: The longest int a changelog holds, in decimal digits, its sign not counted: Python's default limit on int <-> text
#: conversions, fixed here, so that a process with another limit (``sys.set_int_max_str_digits``,
#: ``PYTHONINTMAXSTRDIGITS``) writes and reads the same changelogs.
MAX_INT_DIGITS = 4300
_INT_BOUND = 10**MAX_INT_DIGITS
_INT_TEXT = re.compile(rb"-?[0-9]{1,%d}" % MAX_INT_DIGITS)
#: Digits any limit lets through (no limit can be set below this): shorter ints take ``int``'s own conversion.
_PLAIN_DIGITS = sys.int_info.str_digits_check_threshold
_PLAIN_BOUND = 10**_PLAIN_DIGITS
Scalar = str | bytes | int | float | bool
_SCALARS = (str, bytes, int, float)  # bool is an int
#: Types whose values RocksDB tells apart exactly as a Python dict does (no 1 == 1.0 == True among them).
_AS_IS = frozenset((str, bytes, int))
Op = tuple[bytes, Scalar, Scalar | None]  # (PUT or DELETE, key, value or None)
_DELETED = object()


class KeyValueStore(Protocol):
    """What a changelog is applied to: a ``rocksdict.Rdict`` (``get``, ``write`` of a ``WriteBatch``)."""

    def get(self, key: Any, default: Any = None) -> Any: ...

    def write(self, batch: Any) -> None: ...


def _check(what: str, value: object, key: object) -> Scalar:
    """``value`` (the key or the value of a write to ``key``) when the changelog can hold it; else
    ``ConfigurationError``."""
    kind = type(value)
    if kind is bytes or kind is float or kind is bool or (kind is str and value.isascii()):  # type: ignore[union-attr]
        return value  # type: ignore[return-value]
    if kind is int and -_PLAIN_BOUND < value < _PLAIN_BOUND:  # type: ignore[operator]
        return value  # type: ignore[return-value]
    if not isinstance(value, _SCALARS):  # bool is an int
        raise ConfigurationError(f"blobstate's changelog holds str, bytes, int, float and bool {what}s, not "
                                 f"{type(value).__name__}: encode it first (json.dumps, pickle.dumps)")
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: RocksDB (rocksdict) refuses it when applied
            raise ConfigurationError(f"the {what} of the write to {_describe(key)} is not valid Unicode (a lone "
                                     f"surrogate at {exc.start}), which RocksDB cannot store: store it as bytes "
                                     "(.encode('utf-8', 'surrogatepass'))") from None
    if isinstance(value, int) and not -_INT_BOUND < value < _INT_BOUND:
        raise ConfigurationError(f"the {what} of the write to {_describe(key)} is an int of more than "
                                 f"{MAX_INT_DIGITS} digits, more than blobstate's changelog holds: store it as "
                                 "bytes or a str")
    return value


def _describe(key: object) -> str:
    """``key`` for a message: its repr, cut at 60 characters (an int too long to print, by its size)."""
    if isinstance(key, int) and not -_PLAIN_BOUND < key < _PLAIN_BOUND:
        return f"an int key of {key.bit_length()} bits"
    text = repr(key)
    return f"key {text if len(text) <= 60 else text[:57] + '...'}"


def _encode_scalar(value: Scalar) -> bytes:
    if isinstance(value, bool):
        tag, data = b"t", b"\x01" if value else b"\x00"
    elif isinstance(value, int):
        tag, data = b"i", _int_text(value)
    elif isinstance(value, float):
        tag, data = b"f", _F64.pack(value)
    elif isinstance(value, str):
        tag, data = b"s", value.encode("utf-8", "surrogatepass")
    else:
        tag, data = b"b", bytes(value)
    return tag + _U32.pack(len(data)) + data


def _int_text(value: int) -> bytes:
    """``value`` in decimal ASCII, whatever this interpreter's conversion limit (``decimal`` has none); raises
    ``ConfigurationError`` past ``MAX_INT_DIGITS`` digits."""
    if -_PLAIN_BOUND < value < _PLAIN_BOUND:
        return int.__repr__(value).encode("ascii")  # int's own: an int subclass's str() may be its name
    if not -_INT_BOUND < value < _INT_BOUND:
        raise ConfigurationError(f"blobstate's changelog holds ints of at most {MAX_INT_DIGITS} digits")
    return str(Decimal(int(value))).encode("ascii")


def _int_of(text: bytes) -> int:
    """The int of a changelog's decimal ASCII (``_INT_TEXT``), whatever this interpreter's conversion limit."""
    return int(text) if len(text) <= _PLAIN_DIGITS else int(Decimal(text.decode("ascii")))


def _identity(key: Scalar) -> Scalar | tuple[bytes, Scalar]:
    """What tells ``key`` apart from every other key as RocksDB does (rocksdict stores a type byte, then the value):
    a str, bytes or int key as it is; a bool or a float tagged with its type, a float by its bits. ``1``, ``1.0``
    and ``True`` are three keys; so are ``0.0`` and ``-0.0``, and two NaNs of different bits."""
    if type(key) in _AS_IS:
        return key
    if isinstance(key, bool):
        return b"t", key
    if isinstance(key, float):
        return b"f", _F64.pack(key)
    return key  # a subclass of str, bytes or int: equal to its value, and hashed as it


def encode(ops: list[Op]) -> bytes:
    """The changelog blob of ``ops`` (in order). The common types (exactly ``bytes``, ``str``, ``int``) are encoded
    inline, each item's header (its tag and length) made once per length, the others by ``_encode_scalar``: the
    same bytes as one ``_encode_scalar`` per item, in a quarter less time than a header built per item (1.0 against
    1.36 s for a million ops)."""
    parts = [MAGIC, _U32.pack(len(ops))]
    append, length = parts.append, _U32.pack
    heads: dict[bytes, dict[int, bytes]] = {b"b": {}, b"i": {}, b"s": {}}  # tag: {length: the item's header}
    for op, key, value in ops:
        append(op)
        for item in ((key, value) if op == PUT else (key,)):
            kind = type(item)
            if kind is bytes:
                data = item  # type: ignore[assignment]
                tag = b"b"
            elif kind is int and -_PLAIN_BOUND < item < _PLAIN_BOUND:  # type: ignore[operator]
                data = b"%d" % item  # int's own decimal digits (the type is exactly int)
                tag = b"i"
            elif kind is str:
                data = item.encode("utf-8", "surrogatepass")  # type: ignore[union-attr]
                tag = b"s"
            else:
                assert item is not None
                append(_encode_scalar(item))
                continue
            made = heads[tag]
            head = made.get(len(data))
            if head is None:
                head = made[len(data)] = tag + length(len(data))
            append(head)
            append(data)
    return b"".join(parts)


def decode(data: bytes, *, source: str = "changelog") -> list[Op]:
    """The ops of a changelog blob; ``CorruptIndexError`` naming ``source`` on any defect (never a partial list)."""
    try:
        if data[:len(MAGIC)] != MAGIC:
            raise ValueError("it does not start with the changelog magic")
        pos = len(MAGIC)
        (count,) = _U32.unpack_from(data, pos)
        pos += _U32.size
        if count > len(data):
            raise ValueError(f"it declares {count} ops in {len(data)} bytes")
        ops: list[Op] = []
        for _ in range(count):
            op = data[pos:pos + 1]
            if op not in (PUT, DELETE):
                raise ValueError(f"unknown op {op!r} at byte {pos}")
            key, pos = _decode_scalar(data, pos + 1)
            value = None
            if op == PUT:
                value, pos = _decode_scalar(data, pos)
            ops.append((op, key, value))
        if pos != len(data):
            raise ValueError(f"{len(data) - pos} bytes after the last op")
        return ops
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        raise CorruptIndexError(f"corrupt changelog {source}: {exc}") from None


def _decode_scalar(data: bytes, pos: int) -> tuple[Scalar, int]:
    tag = data[pos:pos + 1]
    (length,) = _U32.unpack_from(data, pos + 1)
    start = pos + 1 + _U32.size
    end = start + length
    if end > len(data):
        raise ValueError(f"a value at byte {pos} runs past the end")
    raw = data[start:end]
    if tag == b"b":
        return raw, end
    if tag == b"s":
        return raw.decode("utf-8", "surrogatepass"), end
    if tag == b"i":
        if not _INT_TEXT.fullmatch(raw):
            raise ValueError(f"bad integer at byte {pos}")
        return _int_of(raw), end
    if tag == b"f" and length == _F64.size:
        return _F64.unpack(raw)[0], end
    if tag == b"t" and raw in (b"\x00", b"\x01"):
        return raw == b"\x01", end
    raise ValueError(f"bad value tag {tag!r} at byte {pos}")


def apply_ops(db: KeyValueStore, ops: list[Op]) -> None:
    """Write ``ops`` into ``db`` in one ``rocksdict.WriteBatch``: all of them or, on error, none."""
    from rocksdict import WriteBatch

    batch = WriteBatch()
    for op, key, value in ops:
        if op == PUT:
            batch.put(key, value)
        else:
            batch.delete(key)
    db.write(batch)


def replay(db: KeyValueStore, data: bytes, *, source: str = "changelog") -> int:
    """Apply one changelog blob to ``db`` atomically; returns the number of ops."""
    ops = decode(data, source=source)
    apply_ops(db, ops)
    return len(ops)


class StagedWrites:
    """One batch's view of a store: reads see the batch's own writes first, writes are staged until ``apply``.

    Dict-style: ``view[key]``, ``view.get(key, default)``, ``key in view``, ``view[key] = value``,
    ``del view[key]``, ``view.put(key, value)``, ``view.delete(key)``, batched ``view.get_many(keys)`` and
    ``view.put_many(pairs)``, ``view.items()`` (the store's entries with
    this batch's writes applied, then the keys new in this batch). ``db`` is the store (read only here).

    Keys are told apart as RocksDB tells them (rocksdict's default mode stores a type byte before the value): ``1``,
    ``1.0`` and ``True``, or ``0.0`` and ``-0.0``, equal in Python, are distinct keys here as in the store.
    """

    def __init__(self, db: Any) -> None:
        self.db = db
        #: the key's identity (``_identity``) -> (key, value or _DELETED); insertion order is the op order
        self._writes: dict[Scalar | tuple[bytes, Scalar], tuple[Scalar, Any]] = {}

    def __getitem__(self, key: Scalar) -> Any:
        value = self.get(key, _DELETED)
        if value is _DELETED:
            raise KeyError(key)
        return value

    def get(self, key: Scalar, default: Any = None) -> Any:
        staged = self._writes.get(key) if type(key) in _AS_IS else self._staged(key)  # the common case inline
        if staged is not None:
            return default if staged[1] is _DELETED else staged[1]
        return self.db.get(key, default)

    def _staged(self, key: object) -> tuple[Scalar, Any] | None:
        """This batch's write of ``key``, or None (a key of a type never staged is left to the store)."""
        if type(key) in _AS_IS:
            return self._writes.get(key)
        if not isinstance(key, _SCALARS):
            return None
        return self._writes.get(_identity(key))

    def __contains__(self, key: object) -> bool:
        return self.get(key, _DELETED) is not _DELETED  # type: ignore[arg-type]

    def __setitem__(self, key: Scalar, value: Scalar) -> None:
        self.put(key, value)

    def __delitem__(self, key: Scalar) -> None:
        self.delete(key)

    def put(self, key: Scalar, value: Scalar) -> None:
        """Stage ``key = value``. Raises ``ConfigurationError`` naming the key, with nothing staged, for a key or
        value the changelog or RocksDB cannot hold (another type, an int of more than ``MAX_INT_DIGITS`` digits, a
        str with a lone surrogate)."""
        _check("key", key, key)
        self._stage(key, _check("value", value, key))

    def get_many(self, keys: Iterable[Scalar], default: Any = None) -> list[Any]:
        """The values of ``keys``, in their order, as ``[get(k, default) for k in keys]`` gives them: this batch's
        write of a key first (``default`` for a staged delete), the others read from the store key by key,
        ``default`` for a key the store lacks. Key by key, not rocksdict's multi-get (``Rdict.get`` of a list): the
        multi-get costs the same per key on a hit and 2 to 6 times as much on a miss (about 2.3 µs against 0.4 in
        lists of 10,000 keys), which is every key of a load (``bench/README.md``, issue 41). The reads go in
        key order when the keys are of types Python orders together."""
        keys = list(keys)
        out: list[Any] = [default] * len(keys)
        unstaged: list[int] = []
        for i, key in enumerate(keys):
            staged = self._writes.get(key) if type(key) in _AS_IS else self._staged(key)
            if staged is None:
                unstaged.append(i)
            elif staged[1] is not _DELETED:
                out[i] = staged[1]
        if len(unstaged) > 1:
            try:  # in key order: neighbouring reads share RocksDB's memtable path and blocks (15-20% less a key)
                unstaged.sort(key=keys.__getitem__)
            except TypeError:  # keys of types Python does not order together: in the caller's order
                pass
        if unstaged:
            get = self.db.get
            for i in unstaged:
                value = get(keys[i], None)
                if value is not None:
                    out[i] = value
        return out

    def put_many(self, items: Iterable[tuple[Scalar, Scalar]]) -> None:
        """Stage ``key = value`` for each pair, in order (as ``put`` one after the other). Raises
        ``ConfigurationError`` as ``put`` does, with nothing of ``items`` staged, when any key or value is one the
        changelog or RocksDB cannot hold."""
        checked = [(key, value) if type(key) is bytes and type(value) is bytes  # what _check lets through as is
                   else (_check("key", key, key), _check("value", value, key)) for key, value in items]
        writes = self._writes
        for key, value in checked:  # ``_stage`` inline
            identity = key if type(key) in _AS_IS else _identity(key)
            writes.pop(identity, None)
            writes[identity] = (key, value)

    def delete(self, key: Scalar) -> None:
        """Stage the deletion of ``key`` (a key that does not exist is fine)."""
        self._stage(_check("key", key, key), _DELETED)

    def _stage(self, key: Scalar, value: Any) -> None:
        identity = key if type(key) in _AS_IS else _identity(key)
        self._writes.pop(identity, None)  # the newest write of a key goes last
        self._writes[identity] = (key, value)

    def items(self) -> Iterator[tuple[Scalar, Any]]:
        seen: set[Scalar | tuple[bytes, Scalar]] = set()
        for key, value in self.db.items():
            staged = self._staged(key)
            if staged is None:
                yield key, value
                continue
            seen.add(_identity(key))
            if staged[1] is not _DELETED:
                yield key, staged[1]
        for identity, (key, staged_value) in self._writes.items():
            if staged_value is not _DELETED and identity not in seen:
                yield key, staged_value

    def __len__(self) -> int:
        """The number of staged writes (puts and deletes) of this batch."""
        return len(self._writes)

    def ops(self) -> list[Op]:
        """The staged writes, oldest first, as changelog ops (one per key: its last write)."""
        return [(DELETE, k, None) if v is _DELETED else (PUT, k, v) for k, v in self._writes.values()]

    def discard(self) -> None:
        """Forget the staged writes (the batch failed)."""
        self._writes.clear()
