"""Requests of retention dropping a whole snapshot of 2,000 blobs in lease mode, counted at a real moto server
(``bench/s3server.py``'s counting middleware, as ``test_requests_per_commit``): S3's ``DeleteObjects`` takes 1,000
keys a request, so each bulk step costs ceil(objects / 1,000) requests and no more (issue 43 item 9)."""

from __future__ import annotations

import math
import os

import pytest

from bench.requests import Counting
from bench.s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server

FILES = 2_000


def _write_files(root, seed: str) -> None:
    os.makedirs(root, exist_ok=True)
    for i in range(FILES):
        with open(os.path.join(root, f"f{i:05d}"), "w", encoding="utf-8") as fh:
            fh.write(f"{seed}-{i}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s3 = S3Server(str(tmp_path_factory.mktemp("moto") / "moto.log"))
    yield s3
    s3.stop()


def test_retention_dropping_2000_blobs_in_lease_mode_sends_one_delete_per_1000_objects(server, tmp_path):
    """A dir store of 2,000 files backed up, every file changed, backed up again with ``retain=1``: the second
    commit removes the TTLs of its 2,001 uploads (2,000 blobs and the index: 3 requests of at most 1,000 leases)
    and retention deletes the 2,001 objects of the snapshot it drops (3 requests) and its record (1): 7
    ``DeleteObjects`` in all. The dropped objects' leases went when their own commit completed; one left behind
    by a crash is swept by gc with its blob's expiry, so retention sends no batches of lease paths of its own
    (9 requests before: 2,001 objects and 2,001 lease paths, in 5)."""
    import boto3

    from blobstate import api

    client = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name=REGION)
    client.create_bucket(Bucket="retain-one")
    options = {"endpoint_url": server.endpoint, "key": ACCESS_KEY, "secret": SECRET_KEY}
    source = str(tmp_path / "store")
    common = dict(repo="s3://retain-one/repo", storage_options=options, ttl_mode="lease", store="many",
                  store_type="dir", work_base=str(tmp_path / "wd"), retain=1)
    _write_files(source, "a")
    api.backup(source, **common)
    _write_files(source, "b")
    result, requests, _ = Counting(server).measure(lambda: api.backup(source, **common))
    deletes = [r for r in requests if r.method == "POST" and "delete" in r.query]
    batches = math.ceil((FILES + 1) / 1000)
    assert len(deletes) == batches + batches + 1, [r.label() for r in requests]
    assert result.blobs_deleted == FILES + 1  # the whole first snapshot: its blobs and its index
