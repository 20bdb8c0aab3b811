"""``blobstate verify``: every blob a snapshot references is present, and each file's size and CRC32C match
what its blobs hold (read end to end, streamed, never written to disk); a delta record's changelog is read, its
size and CRC32C checked and its ops decoded; a group record's partitions, each as its own record; a partitioned
store's latest state, partition by partition (``verify_partitions``). For a store with deltas, the chain of its
latest state is checked too (``chain_problems``).

A ``DataSubset`` reads only part of the data (restic's ``check --read-data-subset``): ``n/t`` reads the files
whose first blob's id falls in bucket ``n`` of ``t`` (the first byte of the id's 128-bit name modulo ``t``,
``t`` <= 256), so running ``1/t`` .. ``t/t`` in turn (a nightly rotation) reads every blob exactly once; ``x%``
reads a random ``x`` percent of the files (at least one; seedable). A file's blobs go with its first one (a
file's CRC32C covers all its chunks). Metadata is always read and checked whatever the subset: records, indexes
(size and CRC32C against the record), changelogs (size, CRC32C, decoded)."""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from blobstate.errors import BlobNotFound, ChecksumMismatch, ConfigurationError, IntegrityError, NothingToRestore
from blobstate.local.checksum import Crc32cSink
from blobstate.model import references
from blobstate.model.chain import current_run, latest_deltas, partition_history, partitions_of, plan_chain
from blobstate.model.changelog import decode
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.repo import Repository


@dataclass(frozen=True)
class DataSubset:
    """Which files' data a verify reads: bucket ``bucket`` (1-based) of ``buckets``, or ``percent`` of them at
    random (``seed``: a fixed sample, for tests). ``parse`` reads ``n/t`` and ``x%``."""

    bucket: int = 0
    buckets: int = 0
    percent: float = 0.0
    seed: int | None = None

    @classmethod
    def parse(cls, text: str, *, seed: int | None = None) -> DataSubset:
        """``1/7`` or ``5%``/``2.5%``; raises ``ConfigurationError`` (exit 2) naming the accepted forms."""
        value = str(text).strip()
        try:
            if value.endswith("%"):
                percent = float(value[:-1])
                if 0 < percent <= 100:
                    return cls(percent=percent, seed=seed)
            else:
                n, _, t = value.partition("/")
                bucket, buckets = int(n), int(t)
                if 1 <= bucket <= buckets <= 256:
                    return cls(bucket, buckets, seed=seed)
        except ValueError:
            pass
        raise ConfigurationError(f"--read-data-subset {text!r}: use n/t (1 <= n <= t <= 256, e.g. 1/7) or x% "
                                 "(0 < x <= 100, e.g. 5%)")

    def describe(self) -> str:
        return f"{self.bucket}/{self.buckets}" if self.buckets else f"{self.percent:g}%"

    def choose(self, first_blobs: list[str]) -> set[str]:
        """The ids among ``first_blobs`` (each file's first blob) whose files are read."""
        if self.buckets:
            return {b for b in first_blobs if bucket_of(b, self.buckets) == self.bucket - 1}
        ids = sorted(set(first_blobs))
        count = min(len(ids), max(1, int(len(ids) * self.percent / 100))) if ids else 0
        return set(random.Random(self.seed).sample(ids, count))


def bucket_of(blob_id: str, buckets: int) -> int:
    """restic's bucket of an id: its first byte modulo ``buckets`` (a blob's name is 32 hex digits)."""
    name = blob_id.rsplit("/", 1)[-1]
    try:
        return int(name[:2], 16) % buckets
    except ValueError:
        return zlib.crc32(name.encode()) % buckets  # not a blobstate name: still one fixed bucket


@dataclass
class VerifyReport:
    """Per checkpoint: files checked, bytes read, files a ``DataSubset`` left unread (``files_skipped``; their
    metadata was checked), and problems (``(file, message)``)."""

    checkpoint: Checkpoint
    files: int = 0
    bytes_read: int = 0
    blobs_with_ttl: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)
    files_skipped: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def partition(self) -> int | None:
        """The partition of a partitioned store this report covers (``verify_partitions``), else None."""
        return getattr(self.checkpoint, "partition", None)

    def to_json(self) -> dict[str, Any]:
        return {"checkpointId": self.checkpoint.checkpoint_id, "generation": self.checkpoint.generation,
                **({} if self.partition is None else {"partition": self.partition}),
                "files": self.files, "filesSkipped": self.files_skipped, "bytesRead": self.bytes_read, "ok": self.ok,
                "problems": [{"file": f, "message": m} for f, m in self.problems]}


def verify_checkpoint(repo: Repository, checkpoint: Checkpoint, subset: DataSubset | None = None, *,
                      overridden: frozenset[str] | set[str] = frozenset()) -> VerifyReport:
    """Read every blob of ``checkpoint``'s snapshot (with ``subset``, the files it picks) and check each file's size
    and CRC32C; the index or changelog is always read and checked (a delta: its changelog; a group: each partition's
    part, its problems named by the partition; ``blobstate.model.layout``'s walk of what records reference).

    Never raises for damaged data: problems are collected in the report (an unreadable index is one problem). A
    group's snapshot part in ``overridden`` (``model.chain.overridden_parts`` of its log: a later delta of its
    batch voids it, issue 27 case 2) whose index is gone is no problem: nothing restores it; nor is any part of a
    voided group (every part of it in ``overridden``, its changelogs too: issue 39 case 7).
    """
    report = VerifyReport(checkpoint)
    whole = checkpoint.is_group and all(e.checkpoint_id in overridden for e in checkpoint.partitions)
    for ref in references.walk_references([checkpoint], repo.read_index):
        if ref.record.checkpoint_id in overridden and (whole or isinstance(ref.error, BlobNotFound)):
            continue
        label = f"partition {getattr(ref.record, 'partition', '?')}: " if checkpoint.is_group else ""
        files, skipped, nbytes, problems = _verify_reference(repo, ref, subset)
        report.files += files
        report.files_skipped += skipped
        report.bytes_read += nbytes
        report.problems += [(f"{label}{f}", m) for f, m in problems]
    return report


def _verify_reference(repo: Repository, ref: references.Reference,
                      subset: DataSubset | None) -> tuple[int, int, int, list[tuple[str, str]]]:
    """``(files, files skipped, bytes read, problems)`` of one record: a delta's changelog read and decoded, a
    snapshot's files (those ``subset`` picks) read end to end. Raises what is not damage (a ``StorageError``)."""
    record = ref.record
    if record.is_delta:
        files, nbytes = 0, 0
        try:
            data = repo.read_changelog(record)
            files, nbytes = 1, len(data)
            decode(data, source=record.changelog_blob_id)
        except IntegrityError as exc:
            return files, 0, nbytes, [("<changelog>", str(exc))]
        return files, 0, nbytes, []
    if ref.index is None:
        if not isinstance(ref.error, IntegrityError):
            raise ref.error  # type: ignore[misc]
        return 0, 0, 0, [("<index>", str(ref.error))]
    files = sorted(ref.index.files().items())
    skipped = 0
    if subset is not None:
        chosen = subset.choose([f.blobs[0].blob_id for _, f in files if f.blobs])
        picked = [(rel, f) for rel, f in files if not f.blobs or f.blobs[0].blob_id in chosen]
        skipped, files = len(files) - len(picked), picked

    def one(item: tuple[str, Any]) -> tuple[int, str | None]:
        rel, f = item
        sink = Crc32cSink()
        for blob, length in f.chunk_ranges():
            sink.mark()
            before = sink.size
            try:
                repo.read_blob(blob, sink)  # type: ignore[arg-type]
            except BlobNotFound:
                return sink.size, f"missing blob {blob.blob_id} (chunk at offset {blob.offset})"
            except ChecksumMismatch as exc:  # a stored form that does not decode (damaged, not authentic)
                return sink.size, f"blob {blob.blob_id} (chunk at offset {blob.offset}): {exc}"
            if sink.size - before != length:
                return sink.size, f"blob {blob.blob_id} holds {sink.size - before} bytes, expected {length}"
        crc = sink.crc32c
        if sink.size != f.size_in_bytes or crc != f.crc32c:
            return sink.size, f"CRC32C {crc:#010x} != recorded {f.crc32c:#010x} (size {sink.size})"
        return sink.size, None

    results = repo.store.map_concurrent(one, files)
    problems = [(rel, problem) for (rel, _), (_, problem) in zip(files, results, strict=True) if problem]
    return len(files), skipped, sum(nbytes for nbytes, _ in results), problems


def verify_partitions(repo: Repository, history: list[Checkpoint],
                      subset: DataSubset | None = None) -> list[VerifyReport]:
    """A partitioned store's latest state: one report per partition, covering every record a restore of the
    partition reads (its newest snapshot and the deltas after it, ``plan_chain``), named by the partition's
    newest record. A chain that cannot be planned (a delta missing) is that partition's problem, never raised."""
    reports = []
    for p in partitions_of(history):
        records = partition_history(history, p)
        try:
            chain = plan_chain(records).records
        except NothingToRestore as exc:
            reports.append(VerifyReport(records[-1], problems=[("<chain>", str(exc))]))
            continue
        report = VerifyReport(chain[-1])
        for record in chain:
            sub = verify_checkpoint(repo, record, subset)
            report.files += sub.files
            report.files_skipped += sub.files_skipped
            report.bytes_read += sub.bytes_read
            report.problems += [(f"{record.kind} {record.checkpoint_id} (batch {record.batch_id}): {f}", m)
                                for f, m in sub.problems]
        reports.append(report)
    return reports


def chain_problems(history: list[Checkpoint]) -> list[tuple[str, str]]:
    """Problems of the chain that makes the latest state of a store with deltas (each partition's, for group
    records): records missing (``BrokenChainError``), or deltas that cannot follow each other because they were
    committed in the other order (a delta of batch ``b + 1`` appended before the delta of batch ``b`` it applies
    on: records of two runs of a query stitched together, which records naming no run cannot tell apart).
    ``[]`` for a store without deltas. Pure: reads no blob."""
    if not any(cp.is_delta or cp.is_group for cp in history):
        return []
    runs = ([(f"partition {p}: ", partition_history(history, p)) for p in partitions_of(current_run(history))]
            if any(cp.is_group for cp in history) else [("", list(history))])
    problems: list[tuple[str, str]] = []
    for prefix, records in runs:
        try:
            chain = plan_chain(records)
        except NothingToRestore as exc:
            problems.append((f"{prefix}<chain>", str(exc)))
            continue
        deltas = latest_deltas(current_run(records))
        first = chain.deltas[0].batch_id if chain.deltas else None
        before = deltas.get(first - 1) if first is not None and chain.snapshot is not None else None
        steps = ([before] if before is not None else []) + list(chain.deltas)
        for prev, cur in zip(steps, steps[1:], strict=False):
            if cur.generation < prev.generation:
                problems.append((f"{prefix}<chain>", (
                    f"the delta of batch {cur.batch_id} (generation {cur.generation}) was committed before the delta "
                    f"of batch {prev.batch_id} (generation {prev.generation}) it applies on: the latest state mixes "
                    "records of two runs of the query")))
                break
    return problems


def add_chain_problems(repo: Repository, reports: list[VerifyReport],
                       history: Callable[[StoreKey], list[Checkpoint]] | None = None) -> None:
    """Add ``chain_problems`` of each store of ``reports`` to that store's last report (``history``: the records
    of a store as already read; default: read from the log)."""
    last: dict[Any, VerifyReport] = {}
    seen: dict[Any, set[str]] = {}  # a partition's broken chain is already reported by verify_partitions
    for report in reports:
        last[report.checkpoint.store_key] = report
        seen.setdefault(report.checkpoint.store_key, set()).update(m for _, m in report.problems)
    for key, report in last.items():
        records = history(key) if history is not None else repo.log.history(key)
        report.problems += [(f, m) for f, m in chain_problems(records) if m not in seen[key]]


def raise_for_reports(reports: list[VerifyReport]) -> None:
    """Raise ``ChecksumMismatch`` (exit code 3) naming every damaged file, if any report has problems."""
    bad = [(r.checkpoint.checkpoint_id, f, m) for r in reports for f, m in r.problems]
    if bad:
        lines = "; ".join(f"{cid}: {f}: {m}" for cid, f, m in bad[:20])
        files = "1 file" if len(bad) == 1 else f"{len(bad)} files"
        raise ChecksumMismatch(f"verification failed for {files}: {lines}")
