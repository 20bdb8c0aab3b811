"""Native TTL on the real emulators, checked through each cloud's own SDK (not through blobstate's code):
S3 object tags (snapshot indexes; a data blob records its expiry in its metadata), Azure blob index tags, GCS
customTime; set at upload, removed once the commit is durable;
lifecycle rules installed on moto and the GCS emulator, printed for Azure; lease mode still available."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request

import pytest
from fixtures_core import write_keys

from blobstate import hookimpl
from blobstate.plugin.interfaces import PutRequest
from blobstate.plugin.manager import get_plugin_manager
from blobstate.repository.backends import open_blob_store

TTL_MS = 3_600_000


def native_ttl_marker(target, blob_id: str) -> bool | None:
    """Does the object carry its cloud's TTL marker? None when the object does not exist. Uses the cloud SDK."""
    key = f"repo/{blob_id}"
    if target.name == "s3":
        import boto3
        from botocore.exceptions import ClientError

        client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="testing",
                              aws_secret_access_key="testing", endpoint_url=target.storage_options["endpoint_url"])
        try:
            tags = client.get_object_tagging(Bucket=target.bucket, Key=key)["TagSet"]
        except ClientError:
            return None
        return any(t["Key"] == "blobstate-ttl" for t in tags)
    if target.name == "azure":
        from azure.core.exceptions import ResourceNotFoundError
        from azure.storage.blob import BlobClient

        client = BlobClient.from_connection_string(target.storage_options["connection_string"], target.bucket, key)
        try:
            return "blobstate_ttl" in client.get_blob_tags()
        except ResourceNotFoundError:
            return None
    obj = gcs_object(target, key)
    if obj is None:
        return None
    custom = obj.get("customTime")
    return bool(custom) and int(custom[:4]) < 2999


def gcs_object(target, key: str) -> dict | None:
    url = (f"{target.storage_options['endpoint_url']}/storage/v1/b/{target.bucket}/o/"
           f"{urllib.parse.quote(key, safe='')}")
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def s3_recorded_expiry(target, blob_id: str) -> int | None:
    """The expiry an S3 object's metadata records (``x-amz-meta-blobstate-expires``), read with boto3."""
    import boto3

    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing", endpoint_url=target.storage_options["endpoint_url"])
    value = client.head_object(Bucket=target.bucket, Key=f"repo/{blob_id}").get("Metadata", {}).get(
        "blobstate-expires")
    return int(value) if value else None


def _marked(target, name: str) -> str:
    """An object whose TTL is a mark in native mode: S3 marks snapshot indexes only (a data blob records its
    expiry in its metadata), Azure and GCS every blob."""
    return f"j/t/s/indexes/{name}.json" if target.name == "s3" else f"j/t/s/blobs/{name}"


def test_native_marker_set_at_upload_and_removed(cloud_target):
    store = open_blob_store(cloud_target.url, storage_options=cloud_target.storage_options, ttl_mode="native")
    blob, plain = _marked(cloud_target, "one"), "j/t/s/indexes/two.json"
    store.put(PutRequest(blob, b"payload", ttl_ms=TTL_MS))
    store.put(PutRequest(plain, b"{}"))
    assert native_ttl_marker(cloud_target, blob) is True
    assert native_ttl_marker(cloud_target, plain) is False
    store.remove_ttl(blob)
    assert native_ttl_marker(cloud_target, blob) is False
    assert store.get_bytes(blob) == b"payload"
    assert not [b for b in store.list("j") if "/ttl/" in b.blob_id]  # native mode writes no lease objects
    if cloud_target.name == "s3":  # a data blob: no tag, its expiry in its own metadata, set in the PUT
        before = int(time.time() * 1000)
        store.put(PutRequest("j/t/s/blobs/three", b"data", ttl_ms=TTL_MS))
        assert native_ttl_marker(cloud_target, "j/t/s/blobs/three") is False
        assert before + TTL_MS <= s3_recorded_expiry(cloud_target, "j/t/s/blobs/three") <= time.time() * 1000 + TTL_MS


def test_gcs_custom_time_moves_forward(gcs_target):
    store = open_blob_store(gcs_target.url, storage_options=gcs_target.storage_options, ttl_mode="native")
    store.put(PutRequest("j/t/s/blobs/x", b"x", ttl_ms=TTL_MS))
    before = gcs_object(gcs_target, "repo/j/t/s/blobs/x")["customTime"]
    store.remove_ttl("j/t/s/blobs/x")
    after = gcs_object(gcs_target, "repo/j/t/s/blobs/x")["customTime"]
    assert after > before and after.startswith("2999")


class TtlProbe:
    """A plugin that, when the checkpoint is written (the commit point, before post-commit cleanup), records the
    TTL marker of every object the commit uploaded, as the cloud SDK sees it."""

    def __init__(self, target) -> None:
        self.target = target
        self.planned: list[str] = []
        self.at_commit_point: dict[str, bool | None] = {}

    @hookimpl
    def blobstate_journal_event(self, event, store_key) -> None:
        if event.type_name == "UploadsPlanned":
            self.planned = [*event.blob_ids, event.index_blob_id]
        elif event.type_name == "CheckpointWritten":
            self.at_commit_point = {b: native_ttl_marker(self.target, b) for b in self.planned}


def test_commit_sets_ttl_on_upload_and_removes_it_after_commit(cloud_target, tmp_path, work_base):
    from blobstate import api

    db = tmp_path / "db"
    write_keys(db, n=2000, value_size=100)
    probe = TtlProbe(cloud_target)
    get_plugin_manager().register(probe, "ttl-probe")
    result = api.backup(str(db), repo=cloud_target.url, store_type="rocksdb", ttl_mode="native",
                        storage_options=cloud_target.storage_options, store="db")
    assert result.files_uploaded >= 3
    assert probe.at_commit_point, "the commit did not reach the commit point"
    index, data = probe.planned[-1], probe.planned[:-1]
    tagged = cloud_target.name != "s3"  # S3 records a data blob's expiry in its metadata instead of a tag
    assert probe.at_commit_point[index] is True
    assert all(probe.at_commit_point[b] is tagged for b in data), probe.at_commit_point
    after = {b: native_ttl_marker(cloud_target, b) for b in probe.planned}
    assert all(v is False for v in after.values()), after
    if not tagged:  # the recorded expiry stays: a record references the blob now
        assert all(s3_recorded_expiry(cloud_target, b) for b in data)


def test_lifecycle_rule_installed_on_moto(s3_target, cli):
    import boto3

    out = cli("gc", "--repo", s3_target.url, "--install-lifecycle", "--ttl", str(2 * 86_400_000),
              env=s3_target.env)
    assert out.returncode == 0, out.stderr
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing", endpoint_url=s3_target.storage_options["endpoint_url"])
    rules = client.get_bucket_lifecycle_configuration(Bucket=s3_target.bucket)["Rules"]
    assert len(rules) == 1
    rule = rules[0]
    assert rule["Status"] == "Enabled" and rule["Expiration"] == {"Days": 2}
    assert rule["Filter"]["And"]["Prefix"] == "repo/"
    assert rule["Filter"]["And"]["Tags"] == [{"Key": "blobstate-ttl", "Value": "2"}]
    # installing again replaces, never duplicates, and leaves other rules alone
    client.put_bucket_lifecycle_configuration(Bucket=s3_target.bucket, LifecycleConfiguration={"Rules": [
        rule, {"ID": "users-own", "Status": "Enabled", "Filter": {"Prefix": "tmp/"}, "Expiration": {"Days": 7}}]})
    assert cli("gc", "--repo", s3_target.url, "--install-lifecycle", "--ttl", str(2 * 86_400_000),
               env=s3_target.env).returncode == 0
    ids = sorted(r["ID"] for r in client.get_bucket_lifecycle_configuration(Bucket=s3_target.bucket)["Rules"])
    assert ids == sorted([rule["ID"], "users-own"])


def test_lifecycle_rule_installed_on_gcs_emulator(gcs_target, cli):
    out = cli("gc", "--repo", gcs_target.url, "--install-lifecycle", env=gcs_target.env)
    assert out.returncode == 0, out.stderr
    url = f"{gcs_target.storage_options['endpoint_url']}/storage/v1/b/{gcs_target.bucket}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        bucket = json.loads(resp.read())
    assert bucket["lifecycle"]["rule"] == [
        {"action": {"type": "Delete"}, "condition": {"daysSinceCustomTime": 1, "matchesPrefix": ["repo/"]}}]


def test_azure_lifecycle_policy_is_printed(azure_target, cli):
    out = cli("gc", "--repo", azure_target.url, "--install-lifecycle", env=azure_target.env)
    assert out.returncode == 0, out.stderr
    policy = json.loads(out.stdout)
    rule = policy["rules"][0]
    assert rule["definition"]["filters"]["blobIndexMatch"] == [{"name": "blobstate_ttl", "op": "==", "value": "1"}]
    assert rule["definition"]["filters"]["prefixMatch"] == [f"{azure_target.bucket}/repo/"]
    assert rule["definition"]["actions"]["baseBlob"]["delete"] == {"daysAfterModificationGreaterThan": 1}
    assert "AccountKey" not in out.stdout + out.stderr


@pytest.mark.parametrize("mode", ["lease", "native"])
def test_gc_sweeps_expired_blobs_in_both_modes(cloud_target, mode):
    """Emulators never run lifecycle rules; ``expired``/``sweep_expired`` find the expired blobs themselves."""
    store = open_blob_store(cloud_target.url, storage_options=cloud_target.storage_options, ttl_mode=mode)
    old, keep = (_marked(cloud_target, n) for n in ("old", "keep")) if mode == "native" else (
        "j/t/s/blobs/old", "j/t/s/blobs/keep")
    store.put(PutRequest(old, b"o", ttl_ms=1000))
    store.put(PutRequest(keep, b"k", ttl_ms=TTL_MS))
    later = int(time.time() * 1000) + 5000
    assert store.sweep_expired("j/t/s", later) == [old]
    assert [b.blob_id for b in store.list("j/t/s")] == [keep]
    leases = [b for b in store.inner._find("j/t/s") if "/ttl/" in b]
    assert leases == (["j/t/s/ttl/keep"] if mode == "lease" else [])


@pytest.mark.parametrize("cloud_target", ["azure", "gcs"], indirect=True)
def test_a_committed_deltas_changelog_loses_its_native_mark_before_the_next_commit(cloud_target, tmp_path):
    """Native mode on Azure and GCS marks every blob, and a lifecycle rule deletes a marked blob once its mark
    expires whatever references it: a delta's changelog mark is removed by the delta's own commit, never left to
    wait for a later removal as in lease mode (``blobstate.commit.deferred``, Safety rule 2). Checked through the
    cloud's SDK while the committer is still open (its close would remove a waiting mark)."""
    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.delta import DeltaCommitter
    from blobstate.model import changelog
    from blobstate.model.records import StoreKey
    from blobstate.repository.repo import Repository

    repo = Repository.open(cloud_target.url, storage_options=cloud_target.storage_options, ttl_mode="native",
                           create=True)
    data = changelog.encode([(changelog.PUT, f"k{i}", "v" * 40) for i in range(800)])  # above the inline bound
    try:
        with StoreCommitter(StoreKey("j", "t", "s"), repo, work_dir=str(tmp_path / "wd"), ttl_ms=TTL_MS) as committer:
            deltas = DeltaCommitter(committer)
            first = deltas.commit_changelog(data, batch_id=1, query_id="q").checkpoint
            assert first.changelog_blob_id
            assert native_ttl_marker(cloud_target, first.changelog_blob_id) is False, "a lifecycle rule would take it"
    finally:
        repo.close()
