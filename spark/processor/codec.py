"""Byte encodings of the processor runtime: grouping keys and map user keys (order-preserving, prefix-free), and
state values (msgpack through msgspec, schema-checked on write).

Keys. A tuple of atomic values is the concatenation of one tagged field each, so that comparing the bytes compares
the tuples field by field (RocksDB's bytewise order is the tuples' order) and no encoded tuple is a prefix of
another (a prefix scan of a grouping key never reaches a longer one)::

    None 0x01 | False 0x02 | True 0x03 | integer 0x04 + 8 bytes big-endian, sign bit flipped
    float 0x05 + 8 bytes IEEE 754, sign-folded | str 0x06 + UTF-8, 0x00 escaped as 0x00 0xFF, ended by 0x00 0x00
    bytes 0x07 + the same escaping

(The end mark is two bytes so that no escape starts with it: with a one-byte end, ``""`` would be a prefix of
``"\x00"``.)

Timestamps and dates are integers (microseconds, days since the epoch), decimals their unscaled integer.

Values. A state value (a value, a list element, a map entry) is stored as the msgpack array ``[version, expiry,
field...]``: the schema version it was written under (an index into the variable's recorded schemas, so a value
written before a nullable field was added is read with that field None), its TTL expiry in ms (nil: none), then
the fields in stored form (timestamps as microseconds, dates as days, decimals as strings). A list is one record,
the msgpack array of its elements. msgpack through msgspec costs about a microsecond a value both ways; one Arrow
IPC message per value costs hundreds of microseconds and hundreds of bytes (``bench/processor_runtime.py``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.schema import Field, Schema, checker

_NULL, _FALSE, _TRUE, _INT, _FLOAT, _STR, _BYTES = b"\x01", b"\x02", b"\x03", b"\x04", b"\x05", b"\x06", b"\x07"
_BIAS = 1 << 63
_SIGN = 1 << 63
_MASK = (1 << 64) - 1
_D = struct.Struct(">d")
_Q = struct.Struct(">Q")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder()


def u64(ms: int) -> bytes:
    """A signed 64-bit integer (a time in ms) as 8 bytes whose bytewise order is the numbers' order."""
    return (ms + _BIAS).to_bytes(8, "big")


def from_u64(data: bytes, pos: int = 0) -> int:
    return int.from_bytes(data[pos:pos + 8], "big") - _BIAS


def _micros(value: dt.datetime) -> int:
    base = EPOCH if value.tzinfo is not None else _EPOCH_NAIVE
    delta = value - base
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _escape(data: bytes) -> bytes:
    return data.replace(b"\x00", b"\x00\xff") + b"\x00\x00"


class KeyCodec:
    """Encode/decode tuples of ``schema`` (a grouping key, a map's user key) as order-preserving bytes."""

    def __init__(self, schema: Schema, *, what: str) -> None:
        self.schema = schema
        self.what = what
        self._checks = [checker(f, what=what) for f in schema.fields]
        self._kinds = [f.type.split("(")[0] for f in schema.fields]
        self._scales = [int(f.type[:-1].split(",")[1]) if f.type.startswith("decimal") else 0
                        for f in schema.fields]
        self._single_str = self._kinds == ["string"]
        self._single_int = self._kinds == ["bigint"]

    def encode(self, key: Sequence[Any]) -> bytes:
        """The bytes of ``key`` (a tuple with one value per field); ``StateVariableError`` when it does not fit."""
        if len(key) != len(self._kinds):
            raise StateVariableError(f"{self.what}: expected {len(self._kinds)} values ({self.schema.ddl()}), "
                                     f"got {len(key)}")
        if self._single_str and type(key[0]) is str:  # the common grouping keys, without the generic loop
            return _STR + _escape(key[0].encode("utf-8", "surrogatepass"))
        if self._single_int and type(key[0]) is int and -_BIAS <= key[0] < _BIAS:
            return _INT + (key[0] + _BIAS).to_bytes(8, "big")
        return b"".join(self._field(i, v) for i, v in enumerate(key))

    def _field(self, i: int, value: Any) -> bytes:
        value = self._checks[i](value)
        kind = self._kinds[i]
        if value is None:
            return _NULL
        if kind == "boolean":
            return _TRUE if value else _FALSE
        if kind == "string":
            return _STR + _escape(value.encode("utf-8", "surrogatepass"))
        if kind == "binary":
            return _BYTES + _escape(value)
        if kind in ("double", "float"):
            bits = _Q.unpack(_D.pack(value if value == value else float("nan")))[0]
            bits = (bits ^ _MASK) if bits & _SIGN else (bits | _SIGN)
            return _FLOAT + _Q.pack(bits)
        if kind in ("timestamp", "timestamp_ntz"):
            number = _micros(value)
        elif kind == "date":
            number = (value - _EPOCH_DATE).days
        elif kind == "decimal":
            number = int(decimal.Decimal(value).scaleb(self._scales[i]).to_integral_exact())
        else:
            number = value
        if not -_BIAS <= number < _BIAS:
            raise StateVariableError(f"{self.what}: {value!r} does not fit in 64 bits")
        return _INT + (number + _BIAS).to_bytes(8, "big")

    def decode(self, data: bytes, pos: int = 0) -> tuple[tuple[Any, ...], int]:
        """``(key, end)``: the tuple encoded at ``data[pos:]`` and the position after it."""
        out: list[Any] = []
        for i, kind in enumerate(self._kinds):
            tag = data[pos:pos + 1]
            pos += 1
            if tag == _NULL:
                out.append(None)
            elif tag in (_TRUE, _FALSE):
                out.append(tag == _TRUE)
            elif tag in (_STR, _BYTES):
                end = pos
                while True:
                    end = data.index(b"\x00", end)
                    follower = data[end + 1:end + 2]
                    if follower == b"\xff":
                        end += 2
                        continue
                    if follower != b"\x00":
                        raise ValueError(f"bad string end at byte {end}")
                    break
                raw = data[pos:end].replace(b"\x00\xff", b"\x00")
                out.append(raw.decode("utf-8", "surrogatepass") if tag == _STR else bytes(raw))
                pos = end + 2
            elif tag == _FLOAT:
                bits = _Q.unpack_from(data, pos)[0]
                bits = (bits ^ _SIGN) if bits & _SIGN else (bits ^ _MASK)
                out.append(_D.unpack(_Q.pack(bits))[0])
                pos += 8
            elif tag == _INT:
                number = int.from_bytes(data[pos:pos + 8], "big") - _BIAS
                pos += 8
                out.append(self._from_int(i, kind, number))
            else:
                raise ValueError(f"bad key tag {tag!r} at byte {pos - 1}")
        return tuple(out), pos

    def _from_int(self, i: int, kind: str, number: int) -> Any:
        if kind == "timestamp":
            return EPOCH + dt.timedelta(microseconds=number)
        if kind == "timestamp_ntz":
            return _EPOCH_NAIVE + dt.timedelta(microseconds=number)
        if kind == "date":
            return _EPOCH_DATE + dt.timedelta(days=number)
        if kind == "decimal":
            return decimal.Decimal(number).scaleb(-self._scales[i])
        return number


def _to_stored(field: Field) -> Callable[[Any], Any] | None:
    kind = field.type.split("(")[0]
    if kind in ("timestamp", "timestamp_ntz"):
        return _micros
    if kind == "date":
        return lambda v: (v - _EPOCH_DATE).days
    if kind == "decimal":
        return str
    return None


def _from_stored(field: Field) -> Callable[[Any], Any] | None:
    kind = field.type.split("(")[0]
    if kind == "timestamp":
        return lambda v: EPOCH + dt.timedelta(microseconds=v)
    if kind == "timestamp_ntz":
        return lambda v: _EPOCH_NAIVE + dt.timedelta(microseconds=v)
    if kind == "date":
        return lambda v: _EPOCH_DATE + dt.timedelta(days=v)
    if kind == "decimal":
        return decimal.Decimal
    return None


class ValueCodec:
    """A state variable's values: ``versions`` are its recorded schemas, oldest first; values are written under
    the last one and read into it (fields added since read as None)."""

    def __init__(self, versions: Sequence[Schema], *, what: str) -> None:
        self.what = what
        self.schema = versions[-1]
        self.version = len(versions) - 1
        fields = self.schema.fields
        self._checks = [checker(f, what=what) for f in fields]
        self._store = [_to_stored(f) for f in fields]
        self._plain = all(s is None for s in self._store)
        load = [_from_stored(f) for f in fields]
        self._readers = [self._reader(old, load) for old in versions]

    def _reader(self, old: Schema, load: list[Callable[[Any], Any] | None]) -> Callable[[list[Any]], tuple]:
        """A function from a stored array written under ``old`` to a tuple of the current schema."""
        positions = {f.name: i for i, f in enumerate(old.fields)}
        index = [positions.get(f.name) for f in self.schema.fields]
        if index == list(range(len(old.fields))) and all(fn is None for fn in load):
            return lambda arr: tuple(arr[2:])

        def read(arr: list[Any]) -> tuple:
            out = []
            for j, src in enumerate(index):
                value = None if src is None else arr[2 + src]
                fn = load[j]
                out.append(value if value is None or fn is None else fn(value))
            return tuple(out)
        return read

    def stored(self, value: Any, expiry: int | None) -> list[Any]:
        """The stored array ``[version, expiry, field...]`` of ``value`` (a tuple or Row of the current schema);
        ``StateVariableError`` when it is None, of another length or a field does not fit."""
        if value is None:
            raise StateVariableError(f"{self.what}: a state value cannot be None (clear() removes it)")
        if not isinstance(value, tuple | list):
            raise StateVariableError(f"{self.what}: a state value is a tuple of the schema's fields "
                                     f"({self.schema.ddl()}), not {type(value).__name__}")
        if len(value) != len(self._checks):
            raise StateVariableError(f"{self.what}: expected {len(self._checks)} fields ({self.schema.ddl()}), "
                                     f"got {len(value)}")
        out: list[Any] = [self.version, expiry]
        if self._plain:
            out.extend(check(v) for check, v in zip(self._checks, value, strict=True))
        else:
            for check, store, v in zip(self._checks, self._store, value, strict=True):
                v = check(v)
                out.append(v if v is None or store is None else store(v))
        return out

    def read(self, arr: list[Any]) -> tuple:
        """The tuple (current schema) of a stored array."""
        return self._readers[arr[0]](arr)


def encode(obj: Any) -> bytes:
    """msgpack bytes of a stored array (or a list of them)."""
    return _ENCODER.encode(obj)


def decode(data: bytes) -> Any:
    """The stored array (or list of arrays) of msgpack bytes."""
    return _DECODER.decode(data)
