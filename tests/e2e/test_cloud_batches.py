"""Bulk calls reach the service through the core's retrying store, counted at the server (a counting loopback
proxy in front of moto and azurite); one retry policy: an unreachable endpoint fails fast, naming it."""

from __future__ import annotations

import io
import os
import time

import pytest
from counting_proxy import CountingProxy, RefusingListener

from blobstate.errors import StorageError
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.backends import open_blob_store
from blobstate.repository.retry import DEFAULT_ATTEMPTS, RetryingBlobStore

S3_BLOBS = 2000
AZURE_BLOBS = 600  # three Blob Batch requests of at most 256


def _ids(n: int) -> list[str]:
    return [f"j/t/s/blobs/{i:05d}" for i in range(n)]


def test_s3_deletes_2000_blobs_in_at_most_3_delete_objects_requests(moto_server, s3_target):
    ids = _ids(S3_BLOBS)
    direct = open_blob_store(s3_target.url, storage_options=s3_target.storage_options, ttl_mode="native",
                             max_concurrency=16)
    direct.put_many([PutRequest(b, b"x") for b in ids])
    with CountingProxy(moto_server.endpoint) as proxy:
        store = open_blob_store(s3_target.url, storage_options={**s3_target.storage_options,
                                                                "endpoint_url": proxy.endpoint},
                                ttl_mode="native")
        assert isinstance(store, RetryingBlobStore)  # the core's store, as the pipelines use it
        store.delete_many(ids)
        bulk = proxy.count("POST", query_has="delete")
        assert 1 <= bulk <= 3, proxy.requests[:10]
        assert proxy.count("DELETE") == 0, "blobs were deleted one request each"
        assert len(proxy.requests) == bulk, proxy.requests[:10]  # nothing else: no per-blob HEAD or LIST
    assert list(direct.list("j/t/s")) == []


def test_azure_batch_delete_is_reached_through_the_retrying_store(azurite_server, azure_target):
    ids = _ids(AZURE_BLOBS)
    direct = open_blob_store(azure_target.url, storage_options=azure_target.storage_options, ttl_mode="native",
                             max_concurrency=16)
    direct.put_many([PutRequest(b, b"x") for b in ids])
    proxied = azure_target.storage_options["connection_string"].replace(azurite_server.endpoint, "{proxy}")
    with CountingProxy(azurite_server.endpoint) as proxy:
        store = open_blob_store(azure_target.url, ttl_mode="native",
                                storage_options={"connection_string": proxied.format(proxy=proxy.endpoint)})
        assert isinstance(store, RetryingBlobStore)
        store.delete_many(ids)
        batches = proxy.count("POST", query_has="comp=batch")
        assert batches == 3, proxy.requests[:10]
        assert proxy.count("DELETE") == 0, "blobs were deleted one request each"
    assert list(direct.list("j/t/s")) == []


def test_unreachable_s3_endpoint_fails_within_seconds_naming_it(tmp_path):
    with RefusingListener() as listener:  # a port that takes connections and answers nothing
        endpoint = listener.endpoint
        options = {"endpoint_url": endpoint, "key": "AKIDEXAMPLE", "secret": "secret-never-shown-123"}
        store = open_blob_store("s3://bucket/repo", storage_options=options, ttl_mode="native")
        # one retry policy: blobstate's attempts, each a single connection (no SDK retries stacked underneath),
        # on both clients of the store: obstore (blob bytes) and botocore (tags, listings)
        # (aiohttp, under botocore, reconnects once when a connection closes before any answer: at most two
        # connections per attempt there, still one request per attempt; obstore opens exactly one)
        sink = io.BytesIO()
        for call, per_attempt in ((lambda: store.get("j/t/s/blobs/a", sink), 1),
                                  (lambda: store.remove_ttl("j/t/s/blobs/a"), 2)):
            before = listener.accepted
            started = time.monotonic()
            with pytest.raises(StorageError) as err:
                call()
            elapsed = time.monotonic() - started
            made = listener.accepted - before
            assert DEFAULT_ATTEMPTS <= made <= per_attempt * DEFAULT_ATTEMPTS, made  # the default settings'
            assert f"127.0.0.1:{listener.port}" in str(err.value), err.value
            assert "secret-never-shown-123" not in str(err.value)
            assert elapsed < 15, elapsed  # was 34.5 s with botocore's retries under ours


def test_closed_port_fails_at_once(tmp_path):
    from cloud_servers import free_port

    port = free_port()  # bound and released: nothing listens there
    store = open_blob_store("s3://bucket/repo", storage_options={"endpoint_url": f"http://127.0.0.1:{port}",
                                                                "key": "k", "secret": "s3cr3t-value-xyz"})
    started = time.monotonic()
    with pytest.raises(StorageError) as err:
        store.put(PutRequest("j/t/s/blobs/a", b"x"))
    assert time.monotonic() - started < 15
    assert f"127.0.0.1:{port}" in str(err.value)
    assert "s3cr3t-value-xyz" not in str(err.value)


def test_transfers_stay_within_the_byte_budget(s3_target, tmp_path):
    """Many large blobs up and down at once through a 32 MiB budget, as multipart uploads and ranged parallel
    GETs (5 MiB parts, S3's smallest): the transport never holds more than the budget in flight (its own
    accounting), and every byte comes back in order."""
    from blobstate.plugin.interfaces import FileRange, GetRequest

    budget = 32 << 20
    store = open_blob_store(s3_target.url, storage_options={**s3_target.storage_options,
                                                            "transfer_budget": budget}, max_concurrency=8)
    transport = store.inner.transport
    assert transport is not None and transport.budget.limit == budget
    transport.single_request_max = transport.part_size = 5 << 20  # blobs of 17 MiB: 4 parts each
    files = []
    for i in range(6):
        path = tmp_path / f"f{i}"
        path.write_bytes(os.urandom(17 << 20))
        files.append(path)
    store.put_many([PutRequest(f"j/t/s/blobs/{p.name}", FileRange(str(p), 0, p.stat().st_size)) for p in files])
    sinks = [io.BytesIO() for _ in files]
    store.get_many([GetRequest(f"j/t/s/blobs/{p.name}", s) for p, s in zip(files, sinks, strict=True)])
    assert all(s.getvalue() == p.read_bytes() for p, s in zip(files, sinks, strict=True))
    assert 0 < transport.budget.peak <= budget
    assert transport.budget.used == 0


def test_obstore_carries_blob_bytes_only_where_the_options_map_exactly(monkeypatch):
    """Pure mapping logic: anything obstore would read differently from s3fs/adlfs keeps the fsspec client."""
    from blobstate.plugins import azure_store, s3_store

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    moto = {"endpoint_url": "http://127.0.0.1:1", "key": "k", "secret": "s"}
    assert s3_store._obstore_config(moto) == {"region": "us-east-1", "access_key_id": "k", "secret_access_key": "s",
                                              "endpoint": "http://127.0.0.1:1", "virtual_hosted_style_request": False}
    assert s3_store._obstore_config({**moto, "profile": "dev"}) is None  # a profile: botocore's business
    assert s3_store._obstore_config({"endpoint_url": "http://127.0.0.1:1"}) is None  # credentials to discover
    assert s3_store._obstore_config({"key": "k", "secret": "s"}) is None  # AWS, region unknown
    assert s3_store._obstore_config({"key": "k", "secret": "s", "client_kwargs": {"region_name": "eu-west-1"}}
                                    )["region"] == "eu-west-1"
    conn = "DefaultEndpointsProtocol=http;AccountName=acc;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:2/acc;"
    assert azure_store._obstore_config({"connection_string": conn}) == {
        "account_name": "acc", "access_key": "a2V5", "endpoint": "http://127.0.0.1:2/acc"}
    assert azure_store._obstore_config({"connection_string": "BlobEndpoint=http://h/;SharedAccessSignature=sv=1"}
                                       ) is None
    assert azure_store._obstore_config({"account_name": "acc", "credential": object()}) is None


@pytest.mark.parametrize("cloud", ["azure", "gcs"])
def test_unreachable_azure_or_gcs_endpoint_fails_within_seconds_naming_it(cloud, monkeypatch):
    """adlfs and gcsfs give no retry option: their own retries (168 s and 166 s against a closed port under ours)
    are switched off, blobstate's policy alone remains."""
    from cloud_servers import AZURITE_KEY, azurite_connection_string, free_port

    port = free_port()  # bound and released: nothing listens there
    endpoint = f"http://127.0.0.1:{port}"
    if cloud == "azure":
        url, options = "az://container/repo", {"connection_string": azurite_connection_string(endpoint)}
    else:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
        url, options = "gs://bucket/repo", {"project": "test", "token": "anon", "endpoint_url": endpoint}
    store = open_blob_store(url, storage_options=options)
    for call in (lambda: list(store.list("j/t/s")), lambda: store.get_bytes("j/t/s/blobs/a")):
        started = time.monotonic()
        with pytest.raises(StorageError) as err:
            call()
        assert time.monotonic() - started < 15
        assert f"127.0.0.1:{port}" in str(err.value)
        assert AZURITE_KEY not in str(err.value)
