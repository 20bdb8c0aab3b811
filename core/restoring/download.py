"""A restore's downloads: files fetched into staging, verified as they stream, and the ones fetched ahead.

``download_files`` fetches the files a plan downloads, files in parallel (the store's ``map_concurrent``), each
file's chunks in order, verifying size, CRC32C and content hash as the bytes stream past (one pass, no re-read).

``Prefetch`` starts, before the plan is made, the downloads of the files no plan can keep or reuse: a snapshot file
that the destination and every local checkpoint lack at its size (``certain_downloads``). Planning a restore into
a previous version reads every kept file it cannot trust by the checksum cache (``blobstate.restoring.plan``); those
reads and the downloads of the changed files now overlap, so the restore takes about the longer of the two instead
of their sum (the idea of issue 31: "hashing in parallel with the downloads so the read is off the critical path";
restic's restorer likewise downloads while it checks the files already there). A fetched-ahead file is verified
exactly as any download; the plan is made as before and decides alone what is kept, reused and downloaded: a file
fetched ahead that the plan does not download (none can be, by ``certain_downloads``) is discarded with the
staging directory.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from blobstate.errors import BlobNotFound, ChecksumMismatch
from blobstate.local.checksum import Crc32cSink
from blobstate.local.files import fsync_dir
from blobstate.model.index import FileIndex
from blobstate.model.progress import NoProgress, Progress
from blobstate.repository.repo import Repository
from blobstate.restoring.swap import Staging, join_rel, remove_tree

_logger = logging.getLogger(__name__)

AHEAD = "ahead"  # the folder of a staging directory that fetched-ahead files land in


def download_files(repo: Repository, files: dict[str, FileIndex], target: Callable[[str], str], progress: Progress,
                   total: int, *, stop: threading.Event | None = None, label: str = "download") -> None:
    """Download ``files`` (relative path -> its index entry) to ``target(rel)`` (a new file: ``FileExistsError``
    if it exists), the largest first, verifying each as it streams, then fsync each file and its directory.
    ``total``: their bytes, for ``progress`` (started under ``label``: a restore's names its store). With
    ``stop`` set, files not yet begun are skipped.

    Raises ``BlobNotFound`` (a chunk's blob is gone) and ``ChecksumMismatch`` (a blob or the assembled file is not
    what the index declares), both exit code 3.
    """
    progress.start(label, total, len(files))

    def one(rel: str) -> None:
        if stop is not None and stop.is_set():
            return
        f = files[rel]
        with open(target(rel), "xb") as fh:
            sink = Crc32cSink(fh, content_hash=f.content_hash is not None)
            for blob, length in f.chunk_ranges():
                sink.mark(limit=length)
                try:
                    got = repo.read_blob(blob, sink)  # type: ignore[arg-type]
                except BlobNotFound:
                    raise BlobNotFound(blob.blob_id, f"chunk at offset {blob.offset} of file {rel!r}") from None
                except ChecksumMismatch as exc:
                    raise ChecksumMismatch(f"blob {blob.blob_id} of file {rel!r}: {exc}") from None
                if got != length:
                    raise ChecksumMismatch(
                        f"blob {blob.blob_id} of file {rel!r} holds {got} bytes, the index says {length}")
                progress.advance(length)
            fh.truncate()
            if (sink.size != f.size_in_bytes or sink.crc32c != f.crc32c
                    or sink.content_hash != f.content_hash):
                raise ChecksumMismatch(
                    f"file {rel!r} does not match the snapshot index after download (size {sink.size} vs "
                    f"{f.size_in_bytes}, CRC32C {sink.crc32c:#010x} vs {f.crc32c:#010x}, content hash "
                    f"{sink.content_hash} vs {f.content_hash}): a blob is damaged")
            fh.flush()
            os.fsync(fh.fileno())
        progress.advance(0, 1)

    try:
        repo.store.map_concurrent(one, sorted(files, key=lambda rel: -files[rel].size_in_bytes))
    finally:
        progress.finish()
    for d in {os.path.dirname(target(rel)) for rel in files}:
        fsync_dir(d)


def certain_downloads(files: dict[str, FileIndex], roots: Iterable[str]) -> dict[str, FileIndex]:
    """The files of ``files`` that no plan keeps or reuses: at none of ``roots`` (the destination, then the local
    checkpoints) is there a regular file of the index's size, which every way of keeping a file
    (``blobstate.restoring.plan.file_matches``) requires first."""
    roots = list(roots)

    def absent(rel: str, f: FileIndex) -> bool:
        for root in roots:
            try:
                st = os.lstat(join_rel(root, rel))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size == f.size_in_bytes:
                return False
        return True

    return {rel: f for rel, f in files.items() if absent(rel, f)}


class Prefetch:
    """Downloads started ahead of the plan into ``staging`` (its ``ahead/`` folder), in a background thread.

    ``take(rel)`` moves a fetched-ahead file to its place in ``staging.new`` once the downloads are done (it raises
    what they raised); ``stop()`` skips the files not begun and waits for the rest, for a restore that fails or
    plans again. The staging directory is the restore's own (``swap.Staging``): an interrupted restore's leftovers
    are removed with it by the next restore (``swap.recover_interrupted``).
    """

    def __init__(self, repo: Repository, staging: Staging, files: dict[str, FileIndex],
                 progress: Progress | None = None) -> None:
        self.staging, self.files = staging, files
        self.root = os.path.join(staging.root, AHEAD)
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="blobstate-prefetch")
        self._future: Future[None] = self._pool.submit(self._run, repo, progress or NoProgress())

    def _run(self, repo: Repository, progress: Progress) -> None:
        for rel in self.files:
            os.makedirs(os.path.dirname(join_rel(self.root, rel)), mode=0o700, exist_ok=True)
        download_files(repo, self.files, lambda rel: join_rel(self.root, rel), progress,
                       sum(f.size_in_bytes for f in self.files.values()), stop=self._stop)

    def wait(self) -> None:
        """Until every fetched-ahead download is done; raises the first error one of them raised."""
        try:
            self._future.result()
        finally:
            self._pool.shutdown(wait=True)

    def take(self, rel: str) -> bool:
        """Move the fetched-ahead ``rel`` to ``staging.new_path(rel)`` (its parent directory must exist); False
        when ``rel`` was not fetched ahead. Call ``wait`` first."""
        if rel not in self.files:
            return False
        os.rename(join_rel(self.root, rel), self.staging.new_path(rel))
        return True

    def stop(self) -> None:
        """Skip the downloads not begun, wait for the running ones and forget their outcome (the restore failed
        or plans again); the files fetched so far stay in the staging directory, removed with it."""
        self._stop.set()
        try:
            self.wait()
        except Exception as exc:  # noqa: BLE001 - the restore already fails or starts over; this is not its error
            _logger.debug("a download fetched ahead failed after the restore stopped using it: %s", exc)

    def discard(self) -> None:
        """``stop`` and remove the staging directory."""
        self.stop()
        remove_tree(self.staging.root)
