"""Test-only blob store plugin: Azure without its conditional delete (``delete_if_expired`` answers None: gc falls
back to plain deletes), as on a store without a precondition on its TTL mark. It takes the ``az`` scheme above the
built-in plugin's priority; loaded through ``BLOBSTATE_PLUGINS``, the way a third party's plugin would be. Shows what
Safety rule 13's residual window costs (``tests/fault/test_conditional_delete.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from blobstate import BlobStoreSpec, hookimpl
from blobstate.plugins.azure_store import AzureBlobStore


class NoConditionalDeleteAzure(AzureBlobStore):
    def delete_if_expired(self, blob_ids: Sequence[str], now_ms: int) -> list[str] | None:
        return None


@hookimpl
def blobstate_blob_stores():  # noqa: ANN201
    return [BlobStoreSpec(name="az-no-conditional-delete", schemes=("az",), factory=NoConditionalDeleteAzure,
                          priority=50)]
