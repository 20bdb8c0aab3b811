"""Append-only writers (restic's append-only mode): a backup with ``append_only`` never deletes, counted at a real
moto server through a counting proxy: not its post-commit retention (a retention of 1 over two backups), not an
abort (a commit that outlived half its TTL), not restore's init cleanup on another host. What a write-only role
may still need is exactly what the README's writer policy allows: in native TTL mode object tags (PutObject with
tags, DeleteObjectTagging), in lease mode DELETE of its own leases (``*/ttl/*``). A gc with delete rights then
removes what the writer left."""

from __future__ import annotations

import re

import pytest
from counting_proxy import CountingProxy

from blobstate import api
from blobstate.errors import StorageError
from blobstate.model import layout
from blobstate.repository.repo import Repository

DAY_MS = 86_400_000


def _deletes(proxy: CountingProxy) -> list[str]:
    """Objects a request deleted (DeleteObject, each key of a DeleteObjects), leases and tag removals left out."""
    single = [path for method, path, query in proxy.requests
              if method == "DELETE" and "tagging" not in query and "/ttl/" not in path]
    bulk = [key for path, body in proxy.post_bodies if "delete" in path.partition("?")[2]
            for key in re.findall(rb"<Key>([^<]*)</Key>", body) if b"/ttl/" not in key]
    return single + [k.decode() for k in bulk]


@pytest.mark.parametrize("ttl_mode", ["native", "lease"])
def test_an_append_only_backup_issues_no_delete_and_gc_removes_what_it_left(tmp_path, work_base, moto_server,
                                                                             s3_target, ttl_mode):
    src = tmp_path / "counts"
    src.mkdir()
    with CountingProxy(moto_server.endpoint) as proxy:
        writer = {**s3_target.storage_options, "endpoint_url": proxy.endpoint, "skip_instance_cache": True}
        common = dict(repo=s3_target.url, store_type="dir", storage_options=writer, ttl_mode=ttl_mode,
                      append_only=True)
        for i in range(2):  # retention of 1: the first would be pruned, its own blobs deleted
            (src / f"f{i}").write_bytes(bytes([i]) * 2000)
            if i:
                (src / f"f{i - 1}").unlink()
            api.backup(str(src), retain=1, **common)
        (src / "aborted").write_bytes(b"a" * 3000)
        with pytest.raises(StorageError, match="ttl"):  # outlives half its 1 ms TTL: aborted after its uploads
            api.backup(str(src), retain=1, ttl=1, **common)
        api.restore(str(tmp_path / "elsewhere"), store="counts", work_base=str(tmp_path / "other-host"), **common)
        assert proxy.count("PUT") > 0
        assert _deletes(proxy) == [], _deletes(proxy)[:5]
        if ttl_mode == "native":
            assert proxy.count("DELETE") == proxy.count("DELETE", query_has="tagging") > 0  # TTL marks removed
        else:  # leases removed (one bulk request per batch), nothing else
            assert any(b"/ttl/" in body for path, body in proxy.post_bodies if "delete" in path)

    options = {**s3_target.storage_options, "skip_instance_cache": True}
    with Repository.open(s3_target.url, storage_options=options, ttl_mode=ttl_mode, create=False) as repo:
        key = repo.log.keys()[0]
        assert len(repo.log.history(key)) == 2  # nothing pruned
        before = {b.blob_id for b in repo.store.list(key.prefix)}
    far = layout.now_ms() + 2 * DAY_MS  # the aborted commit's TTL and the orphans' age have passed
    (report,) = api.gc(repo=s3_target.url, storage_options=options, ttl_mode=ttl_mode, now_ms=far, ttl=DAY_MS)
    assert len(report.checkpoints_pruned) == 1
    # the aborted commit's blobs, left to their TTL, are gc's: S3 native mode's data blobs carry no mark (their
    # expiry recorded in their metadata has passed: orphans), the others expired marks
    assert report.orphans_deleted if ttl_mode == "native" else report.expired_deleted, report
    with Repository.open(s3_target.url, storage_options=options, ttl_mode=ttl_mode, create=False) as repo:
        (latest,) = repo.log.history(key)
        after = {b.blob_id for b in repo.store.list(key.prefix)}
        assert after == repo.retained_references([latest])
    assert after < before
    (again,) = api.gc(repo=s3_target.url, storage_options=options, ttl_mode=ttl_mode, now_ms=far + 2 * DAY_MS,
                      ttl=DAY_MS)  # the pruned records' blobs, orphans now, once older than the TTL
    api.verify(repo=s3_target.url, store="counts", storage_options=options)
