"""``blobstate verify``: every blob a snapshot references is present, and each file's size and CRC32C match
what its blobs hold (read end to end, streamed, never written to disk); a delta record's changelog is read, its
size and CRC32C checked and its ops decoded; a group record's partitions, each as its own record; a partitioned
store's latest state, partition by partition (``verify_partitions``). For a store with deltas, the chain of its
latest state is checked too (``chain_problems``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from blobstate.errors import BlobNotFound, ChecksumMismatch, IntegrityError, NothingToRestore
from blobstate.local.checksum import Crc32cSink
from blobstate.model import layout
from blobstate.model.chain import current_run, latest_deltas, partition_history, partitions_of, plan_chain
from blobstate.model.changelog import decode
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.repo import Repository


@dataclass
class VerifyReport:
    """Per checkpoint: files checked, bytes read, and problems (``(file, message)``)."""

    checkpoint: Checkpoint
    files: int = 0
    bytes_read: int = 0
    blobs_with_ttl: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)

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
                "files": self.files, "bytesRead": self.bytes_read, "ok": self.ok,
                "problems": [{"file": f, "message": m} for f, m in self.problems]}


def verify_checkpoint(repo: Repository, checkpoint: Checkpoint) -> VerifyReport:
    """Read every blob of ``checkpoint``'s snapshot and check each file's size and CRC32C (a delta: its changelog;
    a group: each partition's part, its problems named by the partition; ``blobstate.model.layout``'s walk of
    what records reference).

    Never raises for damaged data: problems are collected in the report (an unreadable index is one problem).
    """
    report = VerifyReport(checkpoint)
    for ref in layout.walk_references([checkpoint], repo.read_index):
        label = f"partition {getattr(ref.record, 'partition', '?')}: " if checkpoint.is_group else ""
        files, nbytes, problems = _verify_reference(repo, ref)
        report.files += files
        report.bytes_read += nbytes
        report.problems += [(f"{label}{f}", m) for f, m in problems]
    return report


def _verify_reference(repo: Repository, ref: layout.Reference) -> tuple[int, int, list[tuple[str, str]]]:
    """``(files, bytes read, problems)`` of one record: a delta's changelog read and decoded, a snapshot's files
    read end to end. Raises what is not damage (a ``StorageError``)."""
    record = ref.record
    if record.is_delta:
        files, nbytes = 0, 0
        try:
            data = repo.read_changelog(record)
            files, nbytes = 1, len(data)
            decode(data, source=record.changelog_blob_id)
        except IntegrityError as exc:
            return files, nbytes, [("<changelog>", str(exc))]
        return files, nbytes, []
    if ref.index is None:
        if not isinstance(ref.error, IntegrityError):
            raise ref.error  # type: ignore[misc]
        return 0, 0, [("<index>", str(ref.error))]
    files = sorted(ref.index.files().items())

    def one(item: tuple[str, Any]) -> tuple[int, str | None]:
        rel, f = item
        sink = Crc32cSink()
        for blob, length in f.chunk_ranges():
            sink.mark()
            before = sink.size
            try:
                repo.store.get(blob.blob_id, sink)  # type: ignore[arg-type]
            except BlobNotFound:
                return sink.size, f"missing blob {blob.blob_id} (chunk at offset {blob.offset})"
            if sink.size - before != length:
                return sink.size, f"blob {blob.blob_id} holds {sink.size - before} bytes, expected {length}"
        crc = sink.crc32c
        if sink.size != f.size_in_bytes or crc != f.crc32c:
            return sink.size, f"CRC32C {crc:#010x} != recorded {f.crc32c:#010x} (size {sink.size})"
        return sink.size, None

    results = repo.store.map_concurrent(one, files)
    problems = [(rel, problem) for (rel, _), (_, problem) in zip(files, results, strict=True) if problem]
    return len(files), sum(nbytes for nbytes, _ in results), problems


def verify_partitions(repo: Repository, history: list[Checkpoint]) -> list[VerifyReport]:
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
            sub = verify_checkpoint(repo, record)
            report.files += sub.files
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
