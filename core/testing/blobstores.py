"""The ``BlobStore`` conformance suite: run it against your own blob store plugin with pytest.

Subclass ``BlobStoreContract`` in a ``Test*`` class and implement its one abstract factory, ``create_store()``:
a working store (fresh or shared: every test writes under its own random prefix), closed by the suite after each
test. Every kit of ``blobstate.testing`` takes this shape (like eventsourcing's ``create_recorder()``); inside the
factory ``self.tmp_path`` is the test's temporary directory and ``self.request`` pytest's request, for any other
fixture (``self.request.getfixturevalue("my_server")``; name a parametrized one in ``@pytest.mark.usefixtures`` on
the class so that pytest parametrizes it)::

    from blobstate.testing.blobstores import BlobStoreContract

    class TestMyStore(BlobStoreContract):
        def create_store(self):
            from my_pkg.store import MyBlobStore
            return MyBlobStore(f"my://{self.tmp_path}", storage_options={}, ttl_mode="lease", max_concurrency=4)

Capabilities a subclass may switch off (each skipped test says why):

- ``atomic_conditional_create = False``: the store (or its emulator) does not enforce the create-only-if-absent
  precondition under concurrency, so the racing-writers test is skipped (the sequential one still runs).
- ``sequential_conditional_create = False``: not even a second create of an existing blob is refused.
- ``atomic_conditional_rewrite = False``: ``rewrite`` is not atomic and conditional under concurrency (the
  interface's default), so the racing-rewriters test is skipped.
- ``sequential_conditional_rewrite = False``: the store (or its emulator) does not even refuse a rewrite from a
  version that is no longer current (the gcp-storage-emulator ignores ``ifGenerationMatch``).

What is checked: put/get of bytes, whole files and file ranges (also a blob of ``large_blob_bytes``);
``BlobNotFound`` for missing blobs; overwrite;
idempotent ``delete`` and ``remove_ttl``; ``has_ttl`` before and after ``remove_ttl``; TTL expiry through
``expired``/``sweep_expired`` at a chosen ``now_ms`` (no waiting); ``list`` recursion, prefix isolation, sizes and
times; exclusive create (sequential and racing); the Rewrite door (``get_versioned`` and ``rewrite``: replaced whole,
refused from a stale version, from a deleted object and as a second create, racing rewriters of which exactly one
wins, nothing left in listings); the ``*_many`` batch calls, directly and through the core's retry
wrapper (a backend's own bulk call must be reached); a lifecycle rule in native TTL mode.
"""

from __future__ import annotations

import io
import os
import threading
import time
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from blobstate.errors import BlobNotFound, IntegrityError, ObjectChangedError
from blobstate.plugin.interfaces import BlobStore, BoundedSink, FileRange, GetRequest, PutRequest
from blobstate.testing.kit import ContractKit

TTL_MS = 3_600_000  # one hour: expiry is checked by passing now_ms, never by waiting
RACERS = 8  # writers racing on one exclusive create


def marked(store: BlobStore, prefix: str, name: str) -> str:
    """An id under ``prefix`` of an object whose TTL is a mark the store sets and removes: a data blob's
    (``<prefix>/blobs/<name>``), or a snapshot index's where the store records a data blob's TTL as its expiry
    instead (``records_data_ttl``: S3 native mode; ``test_a_data_blob_records_its_expiry``)."""
    if getattr(store, "records_data_ttl", False):
        return f"{prefix}/indexes/{name}.json"
    return f"{prefix}/blobs/{name}"


def now_ms() -> int:
    return int(time.time() * 1000)


class BlobStoreContract(ContractKit):
    """The contract tests of ``BlobStore``; the subclass implements ``create_store()``."""


    @abstractmethod
    def create_store(self) -> BlobStore:
        """A working ``BlobStore`` for one test (the suite closes it afterwards)."""

    @pytest.fixture
    def store(self, _kit: None) -> Iterator[BlobStore]:
        store = self.create_store()
        try:
            yield store
        finally:
            store.close()

    atomic_conditional_create: bool = True
    sequential_conditional_create: bool = True
    atomic_conditional_rewrite: bool = True
    sequential_conditional_rewrite: bool = True
    #: bytes of the large-blob test: several multipart parts / ranged reads of the built-in stores (8 MiB each)
    large_blob_bytes: int = 20 << 20

    @pytest.fixture
    def prefix(self) -> str:
        """A fresh store prefix ``conformance/<random>/store`` shaped like a real store key's."""
        return f"conformance/{uuid.uuid4().hex[:12]}/store"

    # -- put / get -------------------------------------------------------------------------------------------
    def test_put_get_bytes(self, store: BlobStore, prefix: str) -> None:
        blob = f"{prefix}/blobs/a"
        data = os.urandom(1000) + b"\x00" * 10
        store.put(PutRequest(blob, data))
        sink = io.BytesIO()
        assert store.get(blob, sink) == len(data)
        assert sink.getvalue() == data
        assert store.get_bytes(blob) == data

    def test_put_whole_file_and_range(self, store: BlobStore, prefix: str, tmp_path: Path) -> None:
        path = tmp_path / "src.bin"
        data = os.urandom(300_000)
        path.write_bytes(data)
        store.put(PutRequest(f"{prefix}/blobs/whole", FileRange(str(path), 0, len(data))))
        store.put(PutRequest(f"{prefix}/blobs/part", FileRange(str(path), 1234, 100_000)))
        assert store.get_bytes(f"{prefix}/blobs/whole") == data
        assert store.get_bytes(f"{prefix}/blobs/part") == data[1234:101_234]

    def test_large_blob_streams(self, store: BlobStore, prefix: str, tmp_path: Path) -> None:
        """A blob several times a transport part (multipart upload, ranged parallel reads): bytes, range offsets
        and the TTL mark (set in the same request that creates the object) all survive."""
        path = tmp_path / "large.bin"
        data = os.urandom(self.large_blob_bytes)
        path.write_bytes(data)
        offset, length = 12_345, self.large_blob_bytes - 99_999
        large, part = marked(store, prefix, "large"), marked(store, prefix, "range")
        store.put(PutRequest(large, FileRange(str(path), 0, len(data)), ttl_ms=TTL_MS))
        store.put(PutRequest(part, FileRange(str(path), offset, length), ttl_ms=TTL_MS))
        assert store.has_ttl(large) and store.has_ttl(part)
        sink = io.BytesIO()
        assert store.get(large, sink) == len(data)
        assert sink.getvalue() == data
        assert store.get_bytes(part) == data[offset:offset + length]

    def test_empty_blob(self, store: BlobStore, prefix: str) -> None:
        store.put(PutRequest(f"{prefix}/blobs/empty", b""))
        assert store.get_bytes(f"{prefix}/blobs/empty") == b""

    def test_overwrite_is_allowed(self, store: BlobStore, prefix: str) -> None:
        blob = f"{prefix}/blobs/a"
        store.put(PutRequest(blob, b"first"))
        store.put(PutRequest(blob, b"second"))
        assert store.get_bytes(blob) == b"second"

    def test_missing_blob_raises_blob_not_found(self, store: BlobStore, prefix: str) -> None:
        with pytest.raises(BlobNotFound):
            store.get(f"{prefix}/blobs/nope", io.BytesIO())
        with pytest.raises(BlobNotFound):
            store.get_bytes(f"{prefix}/blobs/nope")

    # -- delete ----------------------------------------------------------------------------------------------
    def test_delete_is_idempotent(self, store: BlobStore, prefix: str) -> None:
        blob = f"{prefix}/blobs/a"
        store.put(PutRequest(blob, b"x", ttl_ms=TTL_MS))
        store.delete(blob)
        store.delete(blob)
        store.delete(f"{prefix}/blobs/never-existed")
        with pytest.raises(BlobNotFound):
            store.get_bytes(blob)
        assert [b.blob_id for b in store.list(prefix)] == []
        assert blob not in store.expired(prefix, now_ms() + 10 * TTL_MS)

    # -- TTL -------------------------------------------------------------------------------------------------
    def test_ttl_set_on_put_and_removed(self, store: BlobStore, prefix: str) -> None:
        with_ttl, without = marked(store, prefix, "t"), f"{prefix}/indexes/p.json"
        store.put(PutRequest(with_ttl, b"tmp", ttl_ms=TTL_MS))
        store.put(PutRequest(without, b"perm"))
        assert store.has_ttl(with_ttl)
        assert not store.has_ttl(without)
        store.remove_ttl(with_ttl)
        assert not store.has_ttl(with_ttl)
        store.remove_ttl(with_ttl)  # idempotent
        store.remove_ttl(without)  # no TTL: fine
        store.remove_ttl(f"{prefix}/blobs/never-existed")  # missing: fine
        assert store.get_bytes(with_ttl) == b"tmp"  # the content is untouched

    def test_ttl_expiry(self, store: BlobStore, prefix: str) -> None:
        before = now_ms()
        doomed, kept, permanent = (marked(store, prefix, n) for n in ("doomed", "kept", "perm"))
        store.put(PutRequest(doomed, b"d", ttl_ms=TTL_MS))
        store.put(PutRequest(kept, b"k", ttl_ms=TTL_MS))
        store.put(PutRequest(permanent, b"p"))
        store.remove_ttl(kept)
        after = now_ms()
        assert store.expired(prefix, before + TTL_MS - 1) == []  # not yet
        later = after + TTL_MS + 1
        assert store.expired(prefix, later) == [doomed]
        assert store.expired(f"{prefix}-other", later) == []  # prefixes do not leak
        assert store.sweep_expired(prefix, later) == [doomed]
        with pytest.raises(BlobNotFound):
            store.get_bytes(doomed)
        assert store.get_bytes(kept) == b"k" and store.get_bytes(permanent) == b"p"
        assert store.expired(prefix, later) == []

    def test_a_data_blob_records_its_expiry(self, store: BlobStore, prefix: str, tmp_path: Path) -> None:
        """A store that records a data blob's TTL as its expiry (``records_data_ttl``) sets no mark on it: the
        blob has no TTL to list or remove, and ``recorded_expiry`` (``blobstate.plugin.capabilities``) gives the
        expiry its writer recorded in the same request (small and multipart alike), None without one."""
        if not getattr(store, "records_data_ttl", False):
            pytest.skip("this store marks data blobs with their TTL")
        path = tmp_path / "large.bin"
        path.write_bytes(os.urandom(self.large_blob_bytes))
        small, large, plain = f"{prefix}/blobs/s", f"{prefix}/blobs/l", f"{prefix}/blobs/p"
        before = now_ms()
        store.put(PutRequest(small, b"tmp", ttl_ms=TTL_MS))
        store.put(PutRequest(large, FileRange(str(path), 0, self.large_blob_bytes), ttl_ms=TTL_MS))
        store.put(PutRequest(plain, b"perm"))
        after = now_ms()
        assert not store.has_ttl(small) and not store.has_ttl(large)
        assert store.expired(prefix, after + 10 * TTL_MS) == []
        expiry = store.recorded_expiry([small, large, plain, f"{prefix}/blobs/missing"])
        assert expiry is not None
        assert before + TTL_MS <= expiry[small] <= after + TTL_MS and before + TTL_MS <= expiry[large] <= after + TTL_MS
        assert expiry[plain] is None and expiry[f"{prefix}/blobs/missing"] is None
        store.remove_own_ttl_many([small, large])  # nothing to remove: fine
        assert store.get_bytes(small) == b"tmp"

    def test_lifecycle_rule_in_native_mode(self, store: BlobStore) -> None:
        rule = store.lifecycle_rule(TTL_MS)
        if store.ttl_mode == "native":
            assert isinstance(rule, str) and rule.strip(), "a native-TTL store must describe its lifecycle rule"
        else:
            assert rule is None or isinstance(rule, str)

    # -- list ------------------------------------------------------------------------------------------------
    def test_list(self, store: BlobStore, prefix: str) -> None:
        start = now_ms()
        store.put(PutRequest(f"{prefix}/blobs/a", b"12345", ttl_ms=TTL_MS))
        store.put(PutRequest(f"{prefix}/indexes/i.json", b"{}"))
        store.put(PutRequest(f"{prefix}x/blobs/other", b"not mine"))  # a sibling whose name extends the prefix
        listed = {b.blob_id: b for b in store.list(prefix)}
        assert set(listed) == {f"{prefix}/blobs/a", f"{prefix}/indexes/i.json"}
        assert listed[f"{prefix}/blobs/a"].size == 5
        for info in listed.values():
            if info.modified_ms is not None:  # within a generous clock skew of now
                assert abs(info.modified_ms - start) < 600_000
        assert [b.blob_id for b in store.list(f"{prefix}/blobs")] == [f"{prefix}/blobs/a"]
        assert list(store.list(f"{prefix}/nothing-here")) == []

    # -- exclusive create ------------------------------------------------------------------------------------
    def test_put_exclusive(self, store: BlobStore, prefix: str) -> None:
        if not self.sequential_conditional_create:
            pytest.skip("this store does not refuse a second create of an existing blob")
        blob = f"checkpoints/{prefix}/00000000000000000001.json"
        store.put_exclusive(blob, b"first")
        with pytest.raises(FileExistsError):
            store.put_exclusive(blob, b"second")
        assert store.get_bytes(blob) == b"first"
        assert not store.has_ttl(blob)

    def test_put_exclusive_race(self, store: BlobStore, prefix: str) -> None:
        if not self.atomic_conditional_create:
            pytest.skip("this store (or its emulator) does not enforce conditional create under concurrency")
        blob = f"checkpoints/{prefix}/00000000000000000001.json"
        won = race(lambda i: store.put_exclusive(blob, f"writer {i}".encode()), FileExistsError)
        assert store.get_bytes(blob) == f"writer {won}".encode()

    # -- the Rewrite door ------------------------------------------------------------------------------------
    def test_rewrite(self, store: BlobStore, prefix: str) -> None:
        exercise_rewrite(store, prefix, enforced=self.sequential_conditional_rewrite)

    def test_rewrite_race(self, store: BlobStore, prefix: str) -> None:
        if not self.atomic_conditional_rewrite:
            pytest.skip("this store (or its emulator) does not make a rewrite atomic and conditional under concurrency")
        assert store.conditional_rewrite, "a store whose rewrite is atomic and conditional says so"
        exercise_rewrite_race(store, prefix)

    # -- batches ---------------------------------------------------------------------------------------------
    def test_batches(self, store: BlobStore, prefix: str) -> None:
        exercise_batches(store, prefix)

    def test_batches_reach_the_backend_through_the_retry_wrapper(self, store: BlobStore, prefix: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        """The core wraps every store in ``RetryingBlobStore``: a batch call the backend implements itself (S3's
        ``DeleteObjects``, Azure's Blob Batch) must reach that implementation through the wrapper, never the base
        class's one-at-a-time loop. Each overridden batch method of the real store is spied on (and still runs)."""
        from blobstate.repository.retry import RetryingBlobStore

        inner = store.inner if isinstance(store, RetryingBlobStore) else store
        reached: list[str] = []
        own = [name for name in BATCH_CALLS if getattr(type(inner), name) is not getattr(BlobStore, name)]
        for name in own:
            real = getattr(inner, name)

            def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
                reached.append(_name)
                return _real(*args, **kwargs)

            monkeypatch.setattr(inner, name, spy)
        exercise_batches(RetryingBlobStore(inner), prefix)
        assert sorted(set(reached)) == sorted(own), f"batch calls of {type(inner).__name__} never reached: " \
                                                     f"{sorted(set(own) - set(reached))}"


#: The ``BlobStore`` batch calls a backend may implement with the service's bulk API.
BATCH_CALLS = ("put_many", "get_many", "delete_many", "delete_permanent_many", "remove_ttl_many")


def exercise_batches(store: BlobStore, prefix: str) -> None:
    """Every batch call once, with missing blobs mixed in, checking the results through single calls."""
    ids = [marked(store, prefix, f"{i:03d}") for i in range(20)]
    payloads = {b: os.urandom(100 + i) for i, b in enumerate(ids)}
    store.put_many([PutRequest(b, payloads[b], ttl_ms=TTL_MS) for b in ids])
    sinks = {b: io.BytesIO() for b in ids}
    sizes = store.get_many([GetRequest(b, sinks[b]) for b in ids])
    assert sizes == [len(payloads[b]) for b in ids], (sizes, [len(payloads[b]) for b in ids])
    assert all(sinks[b].getvalue() == payloads[b] for b in ids)
    store.remove_ttl_many(ids[:10] + [marked(store, prefix, "missing")])
    assert not store.has_ttl(ids[0]) and store.has_ttl(ids[15])
    assert sorted(store.expired(prefix, now_ms() + TTL_MS + 1)) == ids[10:]
    store.delete_many(ids[::2] + [marked(store, prefix, "missing")])
    assert [b.blob_id for b in store.list(prefix)] == ids[1::2]
    store.delete_permanent_many([ids[1], ids[3], marked(store, prefix, "missing")])  # TTLs removed above
    assert [b.blob_id for b in store.list(prefix)] == ids[5::2]
    store.delete_many([])
    store.delete_permanent_many([])


def exercise_rewrite(store: BlobStore, prefix: str, *, enforced: bool = True) -> None:
    """``rewrite`` and ``get_versioned`` once each way: created (and, ``enforced``, refused as a second create),
    replaced whole from the version read, refused from a stale version and from a deleted object (``enforced``),
    bounded reads, and nothing but the object itself in listings (no temporary files)."""
    name = f"{prefix}/metadata.json"
    store.rewrite(name, b"one", expected=None)
    if enforced:
        with pytest.raises(ObjectChangedError):
            store.rewrite(name, b"created twice", expected=None)
    data, first = store.get_versioned(name, BoundedSink(1024, name))
    assert data == b"one" and first
    store.rewrite(name, b"two, longer than one", expected=first)
    data, second = store.get_versioned(name, BoundedSink(1024, name))
    assert data == b"two, longer than one" and second != first
    if enforced:
        with pytest.raises(ObjectChangedError):
            store.rewrite(name, b"three", expected=first)
        assert store.get_bytes(name) == b"two, longer than one"
    assert [b.blob_id for b in store.list(prefix)] == [name]
    with pytest.raises(IntegrityError):  # bounded like every metadata read
        store.get_versioned(name, BoundedSink(4, name))
    store.delete(name)
    with pytest.raises(BlobNotFound):
        store.get_versioned(name, BoundedSink(1024, name))
    if enforced:
        with pytest.raises(ObjectChangedError):
            store.rewrite(name, b"four", expected=second)
        assert [b.blob_id for b in store.list(prefix)] == []


def exercise_rewrite_race(store: BlobStore, prefix: str) -> None:
    """``RACERS`` writers read the same version of one object, then all rewrite it from that version at once:
    exactly one wins, every other one is refused, and the object holds the winner's bytes whole."""
    name = f"{prefix}/metadata.json"
    store.rewrite(name, b"start", expected=None)
    _, version = store.get_versioned(name, BoundedSink(1024, name))
    won = race(lambda i: store.rewrite(name, f"writer {i} ".encode() * 50, expected=version), ObjectChangedError)
    assert store.get_bytes(name) == f"writer {won} ".encode() * 50
    assert [b.blob_id for b in store.list(prefix)] == [name]


def race(write: Callable[[int], object], refused: type[BaseException]) -> int:
    """``RACERS`` threads released at once, the i-th calling ``write(i)``: exactly one may succeed (its i is
    returned) and every other one must be refused with ``refused``; any other error fails."""
    barrier = threading.Barrier(RACERS)
    won: list[int] = []
    lost: list[int] = []
    errors: list[BaseException] = []

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            write(i)
            won.append(i)
        except refused:
            lost.append(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(won) == 1 and len(lost) == RACERS - 1, (won, lost)
    return won[0]
