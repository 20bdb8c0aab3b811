"""``blobstate verify``: every blob a snapshot references is present, and each file's size and CRC32C match
what its blobs hold (read end to end, streamed, never written to disk); a delta record's changelog is read, its
size and CRC32C checked and its ops decoded; a group record's partitions, each as its own record; a partitioned
store's latest state, partition by partition (``verify_partitions``). For a store with deltas, the chain of its
latest state is checked too (``chain_problems``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from blobstate.errors import BlobNotFound, ChecksumMismatch, IntegrityError, NothingToRestore
from blobstate.local.checksum import Crc32cSink
from blobstate.model.chain import current_run, latest_deltas, partition_history, partitions_of, plan_chain
from blobstate.model.changelog import decode
from blobstate.model.records import Checkpoint
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
    """Read every blob of ``checkpoint``'s snapshot and check each file's size and CRC32C.

    Never raises for damaged data: problems are collected in the report (an unreadable index is one problem).
    """
    report = VerifyReport(checkpoint)
    if checkpoint.is_group:  # every partition's record, each problem named by its partition
        for part in checkpoint.expand():
            sub = verify_checkpoint(repo, part)
            report.files += sub.files
            report.bytes_read += sub.bytes_read
            report.problems += [(f"partition {getattr(part, 'partition', '?')}: {f}", m) for f, m in sub.problems]
        return report
    if checkpoint.is_delta:
        try:
            data = repo.read_changelog(checkpoint)
            report.files, report.bytes_read = 1, len(data)
            decode(data, source=checkpoint.changelog_blob_id)
        except IntegrityError as exc:
            report.problems.append(("<changelog>", str(exc)))
        return report
    try:
        index = repo.read_index(checkpoint)
    except IntegrityError as exc:
        report.problems.append(("<index>", str(exc)))
        return report
    files = sorted(index.files().items())
    report.files = len(files)

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

    for (rel, _), (nbytes, problem) in zip(files, repo.store.map_concurrent(one, files), strict=True):
        report.bytes_read += nbytes
        if problem:
            report.problems.append((rel, problem))
    return report


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


def add_chain_problems(repo: Repository, reports: list[VerifyReport]) -> None:
    """Add ``chain_problems`` of each store of ``reports`` to that store's last report."""
    last: dict[Any, VerifyReport] = {}
    seen: dict[Any, set[str]] = {}  # a partition's broken chain is already reported by verify_partitions
    for report in reports:
        last[report.checkpoint.store_key] = report
        seen.setdefault(report.checkpoint.store_key, set()).update(m for _, m in report.problems)
    for key, report in last.items():
        report.problems += [(f, m) for f, m in chain_problems(repo.log.history(key)) if m not in seen[key]]


def raise_for_reports(reports: list[VerifyReport]) -> None:
    """Raise ``ChecksumMismatch`` (exit code 3) naming every damaged file, if any report has problems."""
    bad = [(r.checkpoint.checkpoint_id, f, m) for r in reports for f, m in r.problems]
    if bad:
        lines = "; ".join(f"{cid}: {f}: {m}" for cid, f, m in bad[:20])
        files = "1 file" if len(bad) == 1 else f"{len(bad)} files"
        raise ChecksumMismatch(f"verification failed for {files}: {lines}")
