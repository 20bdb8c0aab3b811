"""A new partition's RocksDB built from old partitions' copies after a rescale, without rewriting its own key groups'
keys: the executor side of ``blobstate.model.keygroups.plan_rescale``. Spark-agnostic; real RocksDB files.

In a key-grouped store every key is ``bytes`` starting with its key group (``blobstate.model.keygroups.prefix``), so
the key groups of a range are one range of keys (rocksdict orders ``bytes`` keys by their bytes, below every other
type). New partition ``q`` (``PartitionRescale``) is built in its own directory as:

1. its **base**'s copy (the old partition sharing most of its key groups, restored there whole: files, not keys),
   **cut** to ``q``'s range by at most two ``delete_range`` calls (``cut_to``): two range tombstones, whatever the
   number of keys, which compaction later drops with the files' data; nothing is read or written per key;
2. the key groups each **other** source gives (``take_range``): read by one ordered scan of exactly that range of the
   other copy, written into one SST file (``SstFileWriter``, rocksdict's default mode, so the store's own comparator)
   and ingested (``ingest_external_file``): no memtable, no WAL, no compaction of the written keys. This is what
   Flink's RocksDB restore does for the state handles beside its base (it copies their key-group range in); RocksDB
   could ingest the other copy's own SSTs (``allow_db_generated_files``, with a cut on each), but rocksdict does not
   expose that option. Scale-out (N -> M with M a multiple of N, 4 -> 8) has no other source: nothing but the cut.

Both steps refuse a copy holding a key outside ``[prefix(0), prefix(K))`` (``KeyGroupError``): such a key was not
written by a key-grouped store and a cut would lose it, so nothing is deleted (two seeks find it).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from blobstate.errors import ConfigurationError
from blobstate.model.keygroups import KEY_GROUP_BYTES, KeyGroupRange, PartitionRescale, cut_ranges, prefix
from blobstate.model.regroup import PartitionRegroup
from blobstate.spark.errors import KeyGroupError
from blobstate.spark.executor.open_partitions import db_options
from blobstate.worker import Repository, restore_partition


@dataclass(frozen=True)
class BuiltPartition:
    """What ``build_partition`` did: ``cuts`` range deletions on the base, ``taken`` entries copied in from the
    other sources (``taken_bytes`` of keys and values as stored), ``sources`` the old partitions used; where the
    time went (ms): ``restore_ms`` (the chains restored: download and apply, ``restore_regrouped`` only),
    ``cut_ms`` (the ``delete_range`` calls), ``take_ms`` (the others' ranges scanned, written and ingested)."""

    partition: int
    cuts: int
    taken: int
    taken_bytes: int
    sources: tuple[int, ...]
    restore_ms: float = 0.0
    cut_ms: float = 0.0
    take_ms: float = 0.0


def _key_group(key: Any, key_groups: int) -> int | None:
    if isinstance(key, bytes) and len(key) >= KEY_GROUP_BYTES:
        group = int.from_bytes(key[:KEY_GROUP_BYTES], "big")
        return group if group < key_groups else None
    return None


def check_key_grouped(db: Any, key_groups: int, what: str) -> None:
    """``KeyGroupError`` unless every key of the open rocksdict ``db`` starts with a key group below
    ``key_groups``: its first and last keys are enough (every other key lies between them). Two seeks."""
    it = db.iter()
    try:
        for seek in (it.seek_to_first, it.seek_to_last):
            seek()
            if it.valid() and _key_group(it.key(), key_groups) is None:
                raise KeyGroupError(
                    f"{what} holds the key {it.key()!r:.80}, which is not a key of one of its {key_groups} key groups "
                    "(bytes starting with the key group): a cut would lose it, so nothing was cut")
    finally:
        del it


def cut_to(db: Any, keep: KeyGroupRange, key_groups: int, what: str = "the copy") -> int:
    """Delete from the open rocksdict ``db`` every key outside the key groups ``keep`` (``delete_range``, at most
    twice; nothing read per key). Returns the number of range deletions. Raises ``KeyGroupError``."""
    check_key_grouped(db, key_groups, what)
    cuts = cut_ranges(keep, key_groups)
    for begin, end in cuts:
        db.delete_range(begin, end)
    return len(cuts)


def take_range(db: Any, source: Any, keep: KeyGroupRange, key_groups: int, sst_path: str,
               what: str = "the source") -> tuple[int, int]:
    """Copy the key groups ``keep`` of the open rocksdict ``source`` into ``db`` through one SST file written at
    ``sst_path`` (removed after the ingestion) and ingested. Returns ``(entries, bytes of keys and values)``; an
    empty range of the source ingests nothing. Raises ``KeyGroupError``, RocksDB's errors."""
    from rocksdict import IngestExternalFileOptions, Options, SstFileWriter

    check_key_grouped(source, key_groups, what)
    end = prefix(keep.stop)
    writer = SstFileWriter(Options())
    writer.open(sst_path)
    entries = size = 0
    it = source.iter()
    try:
        it.seek(prefix(keep.start))
        while it.valid():
            key = it.key()
            if key >= end:
                break
            value = it.value()
            writer[key] = value
            entries += 1
            size += len(key) + (len(value) if isinstance(value, bytes | str) else 8)
            it.next()
    finally:
        del it
    try:
        if entries:
            writer.finish()
            options = IngestExternalFileOptions()
            options.set_move_files(True)
            db.ingest_external_file([sst_path], options)
    finally:
        if os.path.exists(sst_path):
            os.remove(sst_path)
    return entries, size


def build_partition(db: Any, plan: PartitionRescale | PartitionRegroup, sources: Mapping[int, Any], key_groups: int,
                    scratch_dir: str) -> BuiltPartition:
    """New partition ``plan.partition``'s RocksDB ``db`` (open, holding its base's copy) cut to ``plan.range``,
    then given each other source's key groups (``sources``: old partition -> its open copy, read only; the base's
    entry is not used). SST files are written in ``scratch_dir`` (on ``db``'s filesystem, so ingestion moves them).
    Raises ``KeyGroupError``, ``ConfigurationError`` for a missing source."""
    missing = [s.partition for s in plan.others if s.partition not in sources]
    if missing:
        raise ConfigurationError(f"new partition {plan.partition} needs old partitions {missing}, not given")
    t0 = time.perf_counter()
    cuts = cut_to(db, plan.range, key_groups, f"old partition {plan.base.partition}'s copy")
    t1 = time.perf_counter()
    taken = taken_bytes = 0
    for source in plan.others:
        n, b = take_range(db, sources[source.partition], source.keep, key_groups,
                          os.path.join(scratch_dir, f"take-{plan.partition}-{source.partition}.sst"),
                          f"old partition {source.partition}'s copy")
        taken, taken_bytes = taken + n, taken_bytes + b
    used = sorted(s.partition for s in (plan.base, *plan.others))
    return BuiltPartition(plan.partition, cuts, taken, taken_bytes, tuple(used),
                          cut_ms=(t1 - t0) * 1000, take_ms=(time.perf_counter() - t1) * 1000)


def restore_regrouped(repo: Repository, plan: PartitionRegroup, key_groups: int, dest: str, *,
                      scratch_dir: str) -> BuiltPartition:
    """New partition ``plan.partition``'s RocksDB at ``dest`` from the repository: its base's chain restored there
    (``blobstate.worker.restore_partition``: verified, files), each other source's chain restored under
    ``scratch_dir`` (removed after), then ``build_partition``. ``dest`` is closed again when this returns. Raises
    what a restore raises (``IntegrityError``, ``BrokenChainError``, ``StorageError``), ``KeyGroupError``."""
    import shutil

    from rocksdict import AccessType, Rdict

    t0 = time.perf_counter()
    os.makedirs(scratch_dir, exist_ok=True)
    work = os.path.join(scratch_dir, "work")
    restore_partition(repo, plan.base.chain, dest, work_dir=work)
    opened: dict[int, Any] = {}
    db = Rdict(dest, db_options())
    try:
        for source in plan.others:
            path = os.path.join(scratch_dir, f"old-{source.partition}")
            restore_partition(repo, source.chain, path, work_dir=work)
            opened[source.partition] = Rdict(path, access_type=AccessType.read_only())
        restored = (time.perf_counter() - t0) * 1000
        return dataclasses.replace(build_partition(db, plan, opened, key_groups, scratch_dir), restore_ms=restored)
    finally:
        for source_db in opened.values():
            source_db.close()
        db.close()
        for source in plan.others:
            shutil.rmtree(os.path.join(scratch_dir, f"old-{source.partition}"), ignore_errors=True)


__all__ = ["BuiltPartition", "build_partition", "restore_regrouped", "check_key_grouped", "cut_to", "take_range"]
