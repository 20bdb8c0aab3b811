"""How a store's keys and values are encoded in RocksDB, and read back without running code. Pure, but for
``open_entries``, which reads a RocksDB directory.

The bindings (``blobstate.spark.register``'s ``update(df, batch_id, state)``, ``blobstate.spark.partitioned``'s
``update(db, rows, ctx)``) write through ``rocksdict`` in its default mode, which stores every key and value as one
type byte and a payload (rocksdict's ``encoder.rs``)::

    1  bytes  the bytes                           4  float  IEEE 754 float64, big-endian
    2  str    UTF-8                               5  bool   one byte, 0 or 1
    3  int    two's complement, big-endian,       6  any    a pickle (rocksdict pickles every other Python
              shortest form (any size)                      object; blobstate never writes one)

A binding's ``update`` may write exactly the first five (``blobstate.model.changelog`` refuses anything else when
the batch is staged), and a read gives them back with the same Python type and value. Everything else, a pickled
value some other program wrote with rocksdict (type 6), is read as ``Undecoded``: the bytes
RocksDB holds, never unpickled (a repository is input like any other: reading it never runs code). A RocksDB that
rocksdict did not write (another program's bytewise-ordered store) is read with every key and value ``Undecoded``.

rocksdict orders keys by its own comparator: by type byte first, ints numerically among themselves, all else by
their bytes; a read yields entries in that order.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from blobstate.errors import ConfigurationError
from blobstate.model.keygroups import KEY_GROUP_BYTES

BYTES, STR, INT, FLOAT, BOOL, PICKLE = 1, 2, 3, 4, 5, 6
_F64 = struct.Struct(">d")
#: the Python type of each decoded value, by name (what ``type_name`` returns; ``raw`` for ``Undecoded``)
TYPE_NAMES = ("str", "bytes", "int", "float", "bool", "raw")


@dataclass(frozen=True)
class Undecoded:
    """An entry's stored bytes that are not one of the five types (a pickle rocksdict wrote for another program, an
    unknown type byte, a store rocksdict did not write): ``data`` is exactly what RocksDB holds, type byte
    included; it is never unpickled."""

    data: bytes

    def __bytes__(self) -> bytes:
        return self.data


Value = str | bytes | int | float | bool | Undecoded


def encode(value: Value) -> bytes:
    """The bytes rocksdict stores for ``value`` (its type byte, then the payload); ``Undecoded`` as it was read.
    Raises ``ConfigurationError`` for any other type."""
    if isinstance(value, Undecoded):
        return value.data
    if isinstance(value, bool):
        return bytes((BOOL, 1 if value else 0))
    if isinstance(value, int):
        length = (value + (value < 0)).bit_length() // 8 + 1  # the shortest two's complement form
        return bytes((INT,)) + value.to_bytes(length, "big", signed=True)
    if isinstance(value, float):
        return bytes((FLOAT,)) + _F64.pack(value)
    if isinstance(value, str):
        return bytes((STR,)) + value.encode("utf-8")
    if isinstance(value, bytes | bytearray):
        return bytes((BYTES,)) + bytes(value)
    raise ConfigurationError(f"a store holds str, bytes, int, float and bool keys and values, not "
                             f"{type(value).__name__}: encode it first (json.dumps)")


def decode(data: bytes) -> Value:
    """The value rocksdict stored as ``data``; ``Undecoded`` for a pickle, an unknown type byte or a malformed
    payload (never an error: the bytes are kept)."""
    tag, payload = data[:1], data[1:]
    try:
        if tag == b"\x01":
            return payload
        if tag == b"\x02":
            return payload.decode("utf-8")
        if tag == b"\x03" and payload:
            return int.from_bytes(payload, "big", signed=True)
        if tag == b"\x04" and len(payload) == _F64.size:
            return _F64.unpack(payload)[0]
        if tag == b"\x05" and len(payload) == 1:
            return payload != b"\x00"
    except UnicodeDecodeError:
        pass
    return Undecoded(bytes(data))


def type_name(value: Value) -> str:
    """``str``, ``bytes``, ``int``, ``float``, ``bool`` or ``raw`` (``Undecoded``)."""
    if isinstance(value, Undecoded):
        return "raw"
    if isinstance(value, bool):
        return "bool"
    return type(value).__name__ if type(value) in (str, bytes, int, float) else "raw"


def user_key(stored: Value, key_groups: int) -> Value:
    """The user's key of the key ``stored`` of a store of ``key_groups`` key groups (0: none, ``stored`` itself). A
    key-grouped store keeps each key as its key group's ``KEY_GROUP_BYTES`` big-endian bytes followed by this
    module's encoding of the user's key (``blobstate.spark.partitioned.executor.keygrouped``): the prefix is
    dropped and the rest decoded. A stored key that is not of that shape is given back as it is (nothing lost)."""
    if not key_groups or not isinstance(stored, bytes) or len(stored) <= KEY_GROUP_BYTES or \
            int.from_bytes(stored[:KEY_GROUP_BYTES], "big") >= key_groups:
        return stored
    return decode(stored[KEY_GROUP_BYTES:])


@contextlib.contextmanager
def open_entries(path: str, key_groups: int = 0) -> Iterator[Iterator[tuple[Value, Value]]]:
    """The entries of the RocksDB directory ``path`` (closed by everyone else; opened read-only: rocksdict still
    rewrites its ``rocksdict-config.json`` there), decoded as the module docstring says, in the store's key order;
    of a store of ``key_groups`` key groups, by the user's key (``user_key``: the key-group prefix dropped). A
    context manager: the database is closed on exit."""
    from rocksdict import AccessType, Rdict

    raw = _raw_mode(path)
    # rocksdict takes the mode (and with it the comparator) from its config file, raw without one
    db = Rdict(path, access_type=AccessType.read_only())
    try:
        if raw:  # written in rocksdict's raw mode, or by another program: bytewise keys, no type bytes
            yield ((Undecoded(bytes(k)), Undecoded(bytes(v))) for k, v in db.items())
        else:
            db.set_loads(_undecoded_pickle)  # rocksdict would unpickle type 6: keep its bytes instead
            yield ((user_key(k, key_groups), v) for k, v in db.items()) if key_groups else iter(db.items())
    finally:
        db.close()


def _raw_mode(path: str) -> bool:
    """The mode rocksdict's own config file (``rocksdict-config.json``) records for ``path``: raw without one,
    as rocksdict assumes."""
    try:
        with open(os.path.join(path, "rocksdict-config.json"), encoding="utf-8") as fh:
            return json.load(fh).get("raw_mode") is not False
    except (OSError, ValueError, AttributeError):
        return True


def _undecoded_pickle(payload: bytes) -> Undecoded:
    return Undecoded(bytes((PICKLE,)) + bytes(payload))
