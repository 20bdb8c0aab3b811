"""The blob store conformance suite (``blobstate.testing.blobstores``) against every built-in blob store: memory,
local files, S3 (moto server), Azure (azurite) and GCS (gcp-storage-emulator), in lease and native TTL mode."""

from __future__ import annotations

import uuid

import pytest

from blobstate.repository.backends import open_blob_store
from blobstate.testing.blobstores import BlobStoreContract


def _open(url: str, options: dict, ttl_mode: str, max_concurrency: int = 4):
    return open_blob_store(url, storage_options=options, ttl_mode=ttl_mode, max_concurrency=max_concurrency)


class TestMemoryStore(BlobStoreContract):
    # fsspec's memory filesystem checks existence, then writes: not atomic under concurrency; its rewrite is the
    # interface's default (a check, then a put).
    atomic_conditional_create = False
    atomic_conditional_rewrite = False

    def create_store(self):
        return _open(f"memory://conformance-{uuid.uuid4().hex}", {}, "lease")


class TestFileStore(BlobStoreContract):
    def create_store(self):
        return _open(str(self.tmp_path / "repo"), {}, "lease")


@pytest.mark.parametrize("url", ["file:///tmp/r", "file:///tmp/r/", "file:///", "local:///tmp/r", "file://rel/r",
                                 "file://./rel", "file://.", "file://~/r", "file:///tmp/a b/r%20x", "file:////tmp//r", "file://",
                                 "file://localhost/tmp/r", "file:///tmp/r?x=1"])
def test_a_local_repository_opens_at_the_root_fsspec_gives(url, monkeypatch, tmp_path):
    """``local_root`` stands in for ``fsspec.core.url_to_fs`` on local URLs (so a backup to file:// never imports
    fsspec): same root, and the filesystem is still fsspec's ``LocalFileSystem`` when asked for."""
    import fsspec.core

    from blobstate.plugins.fsspec_store import FsspecBlobStore

    monkeypatch.chdir(tmp_path)
    store = FsspecBlobStore(url)
    fs, root = fsspec.core.url_to_fs(url)
    assert store.is_local and store.local is not None
    assert store.root == root.rstrip("/")
    assert type(store.fs) is type(fs)


@pytest.fixture(params=["lease", "native"])
def ttl_mode(request):
    return request.param


class CloudStoreContract(BlobStoreContract):
    """A store on an emulator (fixture ``target``), in each TTL mode (the parametrized fixture ``ttl_mode``)."""

    target = ""
    max_concurrency = 4

    def create_store(self):
        target = self.request.getfixturevalue(self.target)
        return _open(target.url, target.storage_options, self.request.getfixturevalue("ttl_mode"),
                     max_concurrency=self.max_concurrency)


@pytest.mark.usefixtures("ttl_mode")
class TestS3Store(CloudStoreContract):
    target = "s3_target"


@pytest.mark.usefixtures("ttl_mode")
class TestAzureStore(CloudStoreContract):
    target = "azure_target"


GCS_EMULATOR_MIXUP = (
    "gcp-storage-emulator serves another object's bytes for about 1 object in 300 written in quick succession "
    "(reproduced with plain gcsfs pipe_file/cat_file, no blobstate code); batch semantics are checked on memory, "
    "file, moto and azurite, and GCS end to end by tests/e2e/test_cloud_e2e.py")


@pytest.mark.usefixtures("ttl_mode")
class TestGcsStore(CloudStoreContract):
    # gcp-storage-emulator ignores ifGenerationMatch (=0 and any other generation; real GCS enforces both): no
    # exclusive create and no conditional rewrite to test (what it does not enforce, tried in issue 39: a rewrite
    # from a stale generation, from a made-up one, and a create-only upload over an object all answer 200).
    atomic_conditional_create = False
    sequential_conditional_create = False
    atomic_conditional_rewrite = False
    sequential_conditional_rewrite = False
    target = "gcs_target"
    # gcp-storage-emulator stores one upload's body under another's name when uploads overlap (seen with plain
    # gcsfs too): one transfer at a time against it.
    max_concurrency = 1

    def test_batches(self, store, prefix):
        pytest.skip(GCS_EMULATOR_MIXUP)

    def test_batches_reach_the_backend_through_the_retry_wrapper(self, store, prefix, monkeypatch):
        pytest.skip(GCS_EMULATOR_MIXUP)


def test_cloud_stores_are_selected_by_scheme(s3_target, azure_target, gcs_target):
    from blobstate.plugins.azure_store import AzureBlobStore
    from blobstate.plugins.gcs_store import GcsBlobStore
    from blobstate.plugins.s3_store import S3BlobStore

    for target, cls in ((s3_target, S3BlobStore), (azure_target, AzureBlobStore), (gcs_target, GcsBlobStore)):
        store = open_blob_store(target.url, storage_options=target.storage_options, retry=False)
        assert type(store) is cls


@pytest.mark.parametrize("cloud", ["s3", "azure"])
def test_the_rewrite_door_through_the_fsspec_clients(cloud, request):
    """The Rewrite door where obstore does not carry the store (options it cannot map exactly: s3fs's
    ``PutObject`` with ``If-Match``, the Azure SDK's ``upload_blob`` with ``If-Match``): the same checks as the
    kit's, and the same race."""
    from blobstate.testing.blobstores import exercise_rewrite, exercise_rewrite_race

    target = request.getfixturevalue(f"{cloud}_target")
    store = _open(target.url, {**target.storage_options, "default_cache_type": "none"}, "lease")
    try:
        assert store.inner.transport is None, "the options were meant to keep obstore out"
        prefix = f"conformance/{uuid.uuid4().hex[:12]}/store"
        exercise_rewrite(store, prefix)
        exercise_rewrite_race(store, f"{prefix}-race")
    finally:
        store.close()
