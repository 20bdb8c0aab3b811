"""``blobstate.plugins.toolkit.native_ttl``: the routing every cloud store inherits, between lease mode (the fsspec
store's leases) and native mode (the service's own marks), on fsspec's in-memory filesystem with a store whose
native hooks keep their marks in a dict (the real marks, S3 tags, Azure index tags, GCS ``customTime``, are
tested against moto, azurite and the GCS emulator in tests/contract). Also the lifecycle rule's whole days."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from blobstate.errors import ConfigurationError
from blobstate.model.layout import lease_id
from blobstate.plugin.interfaces import PutRequest
from blobstate.plugins.toolkit.native_ttl import DAY_MS, NativeTtlBlobStore, ttl_days


class MarkingStore(NativeTtlBlobStore):
    """A native-TTL store whose marks are a dict: blob id -> expiry (ms after its write); ``calls`` records which
    hook ran."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.marks: dict[str, int] = {}
        self.calls: list[str] = []
        self.writing: list[int] = []

    def _native_ttl_kwargs(self, ttl_ms: int) -> dict[str, Any]:
        self.writing.append(ttl_ms)  # the mark goes with the write itself
        return {}

    def _remove_native_ttl(self, blob_id: str) -> None:
        self.calls.append(f"remove {blob_id}")
        self.marks.pop(blob_id, None)

    def _drop_native_ttl(self, blob_id: str) -> None:
        self.calls.append(f"drop {blob_id}")
        self.marks.pop(blob_id, None)

    def _expired_native(self, prefix: str, now_ms: int) -> list[str]:
        self.calls.append(f"expired {prefix} {now_ms}")
        return sorted(b for b, expiry in self.marks.items() if b.startswith(prefix) and expiry <= now_ms)


def blob() -> str:
    return f"j/t/s/blobs/{uuid.uuid4().hex}"


@pytest.fixture
def stores():
    """``make(ttl_mode)``: a ``MarkingStore`` on a fresh in-memory bucket."""
    made: list[MarkingStore] = []

    def make(ttl_mode: str | None) -> MarkingStore:
        store = MarkingStore(f"memory://bucket-{uuid.uuid4().hex[:8]}/repo", ttl_mode=ttl_mode)
        made.append(store)
        return store

    yield make
    for store in made:
        if store.fs.exists(store.root):
            store.fs.rm(store.root, recursive=True)
        store.close()


@pytest.mark.parametrize("ttl_ms, days", [(1, 1), (0, 1), (DAY_MS, 1), (DAY_MS + 1, 2), (7 * DAY_MS, 7)])
def test_a_lifecycle_rule_covers_a_ttl_in_whole_days_at_least_one(ttl_ms, days):
    assert ttl_days(ttl_ms) == days


def test_lease_mode_is_the_default_and_keeps_the_fsspec_stores_leases(stores):
    store = stores(None)
    assert store.ttl_mode == "lease" and not store.native
    a, b = blob(), blob()
    for blob_id in (a, b):
        store.put(PutRequest(blob_id, b"data", ttl_ms=60_000))
    assert store.writing == [] and store.fs.exists(store.path(lease_id(a)))
    store.remove_ttl_many([a])
    assert not store.fs.exists(store.path(lease_id(a))) and store.fs.exists(store.path(a))
    store.delete_many([b])  # the blob and its lease
    assert not store.fs.exists(store.path(b)) and not store.fs.exists(store.path(lease_id(b)))
    store.remove_own_ttl_many([a])  # idempotent
    assert store.calls == []  # no native hook in lease mode


def test_native_mode_marks_the_blob_in_its_own_write_and_routes_every_ttl_call_to_the_hooks(stores):
    store = stores("native")
    a, b, c = blob(), blob(), blob()
    for blob_id in (a, b, c):
        store.put(PutRequest(blob_id, b"data", ttl_ms=60_000))
        store.marks[blob_id] = 60_000
    assert store.writing == [60_000] * 3 and not store.fs.exists(store.path(lease_id(a)))  # no lease objects
    store.remove_ttl(a)
    store.remove_ttl_many([b])
    store.remove_own_ttl_many([c])
    assert store.calls == [f"remove {a}", f"remove {b}", f"drop {c}"] and store.marks == {}
    store.marks[a] = 10
    assert store.expired("j/t/s/", 10) == [a] and store.calls[-1] == "expired j/t/s/ 10"
    store.delete_many([a, b])
    assert not store.fs.exists(store.path(a)) and store.fs.exists(store.path(c))
    store.delete_many([])  # nothing: no call


def test_a_put_without_a_ttl_carries_no_mark(stores):
    store = stores("native")
    store.put(PutRequest(blob(), b"data"))
    assert store.writing == []


def test_an_unknown_ttl_mode_is_refused():
    with pytest.raises(ConfigurationError, match="does not support ttl mode 'forever'"):
        MarkingStore("memory://bucket/repo", ttl_mode="forever")


def test_the_lifecycle_rule_is_limited_to_the_repositorys_prefix(stores):
    store = stores(None)
    assert store.rule_prefix() == f"{store.key_prefix}/" and store.key_prefix.endswith("/repo")
    assert store.bucket_key("j/t/s/blobs/x") == (store.bucket, f"{store.key_prefix}/j/t/s/blobs/x")
