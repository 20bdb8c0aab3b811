"""Test-only blob store plugin: the file:// store with the ``BlobStore`` interface's default ``rewrite`` (a version
check, then a ``put`` that writes in place, truncating first), as a third-party store that does not override it
would have. It takes the ``file`` scheme above the built-in plugin's priority; loaded through ``BLOBSTATE_PLUGINS``,
the way a third party's plugin would be. A key rotation killed in the middle of such a write must still leave a
key that opens the repository (the copy of the previous wrapping, Safety rule 24)."""

from __future__ import annotations

from blobstate import BlobStoreSpec, hookimpl
from blobstate.plugin.interfaces import BlobStore
from blobstate.plugins.fsspec_store import FsspecBlobStore


class InPlaceRewriteFileStore(FsspecBlobStore):
    rewrite = BlobStore.rewrite
    conditional_rewrite = False  # type: ignore[assignment]


@hookimpl
def blobstate_blob_stores():  # noqa: ANN201
    return [BlobStoreSpec(name="file-in-place-rewrite", schemes=("file",), factory=InPlaceRewriteFileStore,
                          priority=50)]
