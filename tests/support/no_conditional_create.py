"""Test-only blob store plugin: S3 whose conditional create is switched off (a store that ignores
``If-None-Match: *``, like an S3-compatible server without it, or a proxy that strips the header).

``put_exclusive`` writes unconditionally, so a second create of the same object succeeds and overwrites the first.
It takes the ``s3`` scheme above the built-in plugin's priority; loaded through ``BLOBSTATE_PLUGINS``, the way a
third party's plugin would be. ``blobstate doctor`` must report the broken guarantee.
"""

from __future__ import annotations

from blobstate import BlobStoreSpec, hookimpl
from blobstate.plugin.interfaces import PutRequest
from blobstate.plugins.s3_store import S3BlobStore


class NoConditionalCreateS3(S3BlobStore):
    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        self.put(PutRequest(blob_id, data))


@hookimpl
def blobstate_blob_stores():  # noqa: ANN201
    return [BlobStoreSpec(name="s3-no-conditional-create", schemes=("s3",), factory=NoConditionalCreateS3,
                          priority=50)]
