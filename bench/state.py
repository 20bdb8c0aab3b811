"""The benchmark's data: a RocksDB state made with rocksdict, changed by a fraction of its keys, snapshotted with
RocksDB's own Checkpoint, and the same state written as a changelog (a Kafka-like log of framed records).

Keys are ``key<12 digits>`` (15 bytes); values are ``os.urandom`` (incompressible) of ``size // keys - 15`` bytes.
Options are RocksDB's defaults (64 MiB memtable, level compaction, 64 MiB target SST size) in raw mode, so what
compaction does to the files after a change is what a real store would do; only the SST format version is pinned
(see ``SST_FORMAT_VERSION``).
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

KEY_LEN = 15
WRITE_BATCH = 1000  # records per WriteBatch while generating

# Changelog framing, after Kafka's v0 message set: offset (int64), size (int32), then the message: crc32 (uint32)
# over the rest, key length (int32), key, value length (int32), value. Big-endian like Kafka.
RECORD_HEAD = struct.Struct(">qi")
CRC = struct.Struct(">I")
LEN = struct.Struct(">i")


def key_of(i: int) -> bytes:
    return b"key%012d" % i


def value_size(size_bytes: int, keys: int) -> int:
    """Bytes per value so that ``keys`` records hold about ``size_bytes`` (at least 16)."""
    return max(16, size_bytes // max(1, keys) - KEY_LEN)


# SST format 5, not rocksdict's default 6: Debian's ``ldb`` (RocksDB 7.8, BackupEngine) cannot read format 6.
SST_FORMAT_VERSION = 5


def db_options() -> object:
    """rocksdict ``Options``: RocksDB defaults, raw bytes keys and values, created if missing, SST format 5."""
    from rocksdict import BlockBasedOptions, Options

    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    table = BlockBasedOptions()
    table.set_format_version(SST_FORMAT_VERSION)
    opts.set_block_based_table_factory(table)
    return opts


def generate(db_dir: str, *, size_bytes: int, keys: int, seed: int = 1) -> None:
    """Write ``keys`` records of incompressible values into a new RocksDB at ``db_dir`` and flush it."""
    from rocksdict import Rdict, WriteBatch

    vsize = value_size(size_bytes, keys)
    db = Rdict(db_dir, options=db_options())
    try:
        rng = random.Random(seed)
        order = list(range(keys))
        rng.shuffle(order)  # random insert order: overlapping SSTs, real compaction work
        for start in range(0, keys, WRITE_BATCH):
            wb = WriteBatch(raw_mode=True)
            for i in order[start:start + WRITE_BATCH]:
                wb.put(key_of(i), os.urandom(vsize))
            db.write(wb)
        db.flush(True)
    finally:
        db.close()


def change(db_dir: str, *, fraction: float, keys: int, size_bytes: int, seed: int) -> int:
    """Overwrite ``fraction`` of the keys (chosen at random) with new values and flush; returns how many."""
    from rocksdict import Rdict, WriteBatch

    vsize = value_size(size_bytes, keys)
    count = max(1, int(round(keys * fraction)))
    chosen = random.Random(seed).sample(range(keys), count)
    db = Rdict(db_dir, options=db_options())
    try:
        for start in range(0, count, WRITE_BATCH):
            wb = WriteBatch(raw_mode=True)
            for i in chosen[start:start + WRITE_BATCH]:
                wb.put(key_of(i), os.urandom(vsize))
            db.write(wb)
        db.flush(True)
    finally:
        db.close()
    return count


def snapshot(db_dir: str, target_dir: str) -> None:
    """RocksDB Checkpoint of ``db_dir`` into ``target_dir`` (must not exist): hard-linked SSTs."""
    from rocksdict import Checkpoint, Rdict

    if os.path.exists(target_dir):
        shutil.rmtree(target_dir)
    db = Rdict(db_dir, options=db_options())
    try:
        Checkpoint(db).create_checkpoint(target_dir)
    finally:
        db.close()


@dataclass(frozen=True)
class FileInfo:
    name: str
    size: int
    inode: int


def inventory(directory: str) -> dict[str, FileInfo]:
    """Regular files directly in ``directory`` by name (RocksDB directories are flat)."""
    out: dict[str, FileInfo] = {}
    for entry in os.scandir(directory):
        if entry.is_file(follow_symlinks=False):
            st = entry.stat(follow_symlinks=False)
            out[entry.name] = FileInfo(entry.name, st.st_size, st.st_ino)
    return out


def is_mutable(name: str) -> bool:
    """RocksDB files that are rewritten or grow under the same name (everything but SST and blob files)."""
    return not name.endswith((".sst", ".blob"))


def delta_files(old_dir: str, new_dir: str) -> list[str]:
    """Files of ``new_dir`` a perfect incremental copy must write: SSTs not in ``old_dir`` plus mutable files."""
    old = inventory(old_dir)
    return sorted(n for n, f in inventory(new_dir).items() if is_mutable(n) or n not in old)


def total_bytes(directory: str, names: list[str] | None = None) -> int:
    files = inventory(directory)
    return sum(files[n].size for n in (names if names is not None else files))


def iterate(db_dir: str) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of the RocksDB at ``db_dir``, opened read-only, in key order."""
    from rocksdict import AccessType, Options, Rdict

    db = Rdict(db_dir, options=Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        yield from db.items()
    finally:
        db.close()


def write_changelog(db_dir: str, log_path: str) -> tuple[int, int]:
    """Write the state at ``db_dir`` as a compacted changelog (one record per live key) to ``log_path``.

    Returns (records, bytes). The framing is Kafka's v0 message set (see the module constants).
    """
    records = 0
    with open(log_path, "wb") as fh:
        for offset, (k, v) in enumerate(iterate(db_dir)):
            body = LEN.pack(len(k)) + k + LEN.pack(len(v)) + v
            message = CRC.pack(zlib.crc32(body)) + body
            fh.write(RECORD_HEAD.pack(offset, len(message)))
            fh.write(message)
            records += 1
        fh.flush()
        os.fsync(fh.fileno())
    return records, os.path.getsize(log_path)
