"""Spark SQL's ``hash(cols...)`` in Python, for the key column types a key-grouped store accepts: the hash
``repartition(N, *key_cols)`` partitions by (Murmur3 x86 32-bit, seed 42, each column's hash seeding the next, a null
leaving it as it was). A task computes a written key's key group with it (``pmod(hash, K)``,
``blobstate.model.keygroups.key_group_of_hash``) from the key columns' values, exactly as the JVM routed the rows.

Spark hashes by the column's type, not by the Python value: ``integer``, ``short`` and ``byte`` as a 4-byte int,
``long`` as an 8-byte long (its low word, then its high word), ``boolean`` as the int 1 or 0,
``string`` (UTF-8) and ``binary`` as bytes: whole 4-byte little-endian words, then each remaining byte as a signed
int of its own (Spark's ``hashUnsafeBytes``, which differs from reference Murmur3 in that tail, so a plain
murmur3 library gives other values for most strings). Other types (floating point, decimals, nested ones) are
refused (``ConfigurationError``): their hashing has normalisations or conversions this module does not carry
(dates and timestamps too, for now).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from blobstate.errors import ConfigurationError

SEED = 42
_M32 = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
#: Spark type name -> how its values are hashed
_INT_TYPES = frozenset({"integer", "int", "short", "smallint", "byte", "tinyint"})
_LONG_TYPES = frozenset({"long", "bigint"})
_BYTES_TYPES = frozenset({"string", "binary"})
SUPPORTED_TYPES = _INT_TYPES | _LONG_TYPES | _BYTES_TYPES | {"boolean"}


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * _C1) & _M32, 15) * _C2) & _M32


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _M32


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M32
    return h1 ^ (h1 >> 16)


def hash_int(value: int, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (unsigned 32-bit in and out)."""
    return _fmix(_mix_h1(seed, _mix_k1(value & _M32)), 4)


def hash_long(value: int, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashLong``: the low word, then the high word."""
    value &= (1 << 64) - 1
    h1 = _mix_h1(seed, _mix_k1(value & _M32))
    return _fmix(_mix_h1(h1, _mix_k1(value >> 32)), 8)


def hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes``: whole little-endian words, then each tail byte, signed."""
    aligned = len(data) - len(data) % 4
    h1 = seed
    for i in range(0, aligned, 4):
        h1 = _mix_h1(h1, _mix_k1(int.from_bytes(data[i:i + 4], "little")))
    for b in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1((b - 256 if b > 127 else b) & _M32))
    return _fmix(h1, len(data))


def check_types(types: Sequence[str]) -> None:
    """``ConfigurationError`` naming the first key column type this module cannot hash as Spark does."""
    for t in types:
        if t.lower() not in SUPPORTED_TYPES:
            raise ConfigurationError(
                f"a key-grouped store's key columns must be of the types {sorted(SUPPORTED_TYPES)}, not {t!r}: their "
                "hash is computed again in the task to place a written key in its key group")


def spark_hash(values: Sequence[Any], types: Sequence[str]) -> int:
    """Spark SQL's ``hash(values...)`` for columns of ``types`` (Spark type names, ``check_types``): a signed 32-bit
    int. ``ConfigurationError`` for another number of values than types, an unsupported type or a value its type
    cannot hold."""
    if len(values) != len(types):
        raise ConfigurationError(f"{len(values)} key values for {len(types)} key columns")
    h = SEED
    for value, type_name in zip(values, types, strict=True):
        t = type_name.lower()
        if value is None:
            continue
        if t == "boolean" and isinstance(value, bool):
            h = hash_int(int(value), h)
        elif t in _INT_TYPES and isinstance(value, int) and not isinstance(value, bool):
            h = hash_int(value, h)
        elif t in _LONG_TYPES and isinstance(value, int) and not isinstance(value, bool):
            h = hash_long(value, h)
        elif t == "string" and isinstance(value, str):
            h = hash_bytes(value.encode("utf-8"), h)
        elif t == "binary" and isinstance(value, bytes | bytearray):
            h = hash_bytes(bytes(value), h)
        else:
            check_types([type_name])
            raise ConfigurationError(f"the key value {value!r:.80} is not a Spark {type_name} this hash takes")
    return h - (1 << 32) if h & 0x80000000 else h


__all__ = ["SEED", "SUPPORTED_TYPES", "check_types", "hash_bytes", "hash_int", "hash_long", "spark_hash"]
