"""Issue 31: a backup and a restore through S3 in lease mode (the default) import neither s3fs nor botocore: with
the storage options mapped onto obstore, the blob bytes, the listings, the leases and the bulk deletes all go
through it (``NativeTtlBlobStore.metadata_by_transport``), and s3fs with aiobotocore and botocore (about 0.3 s of
CPU per process) is made only for what only it does (native mode's tags, lifecycle rules, a new repository's bucket
check). Measured against the moto server, in fresh processes, with the checkpoint log in the bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from fixtures_core import read_all, write_keys

PROBE = textwrap.dedent("""
    import json, sys
    from blobstate.cli import main
    try:
        main(sys.argv[1:], standalone_mode=False)
    finally:
        print(json.dumps(sorted(sys.modules)))
""")
SDK = ("s3fs", "botocore", "aiobotocore", "boto3", "aiohttp")


def _modules(tmp_path, env, *argv):
    env = {**os.environ, **env, "BLOBSTATE_WORK_DIR": str(tmp_path / "work"),
           "BLOBSTATE_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", PROBE, *map(str, argv)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {m for m in json.loads(proc.stdout.strip().splitlines()[-1]) if m.split(".")[0] in SDK}


@pytest.mark.slow
def test_an_s3_backup_and_restore_in_lease_mode_never_import_the_aws_sdk(tmp_path, s3_target):
    store = tmp_path / "s"
    data = write_keys(store, n=300)
    repo = s3_target.url
    first = _modules(tmp_path, s3_target.env, "backup", store, "--repo", repo, "-q")  # creates the repository
    assert {m.split(".")[0] for m in first} <= set(SDK)  # the bucket check of a new repository may use s3fs
    write_keys(store, n=50, seed=7)
    assert _modules(tmp_path, s3_target.env, "backup", store, "--repo", repo, "--retain", "1", "-q") == set()
    dest = tmp_path / "restored" / "s"
    assert _modules(tmp_path, s3_target.env, "restore", dest, "--repo", repo, "-q") == set()
    assert read_all(dest) == read_all(store) != data


@pytest.mark.slow
def test_a_stray_key_obstore_cannot_name_never_breaks_a_listing(tmp_path, s3_target, cli):
    """A key with an empty segment (``blobs//stray``, written by some other tool) cannot be named by object_store,
    which refuses the whole listing: the store lists that prefix through s3fs instead, so backups and gc go on
    (layout ignores the key)."""
    import boto3

    store = tmp_path / "s"
    write_keys(store, n=200)
    repo = s3_target.url
    assert cli("backup", store, "--repo", repo, "-q", env=s3_target.env).returncode == 0
    client = boto3.client("s3", endpoint_url=s3_target.storage_options["endpoint_url"], region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.put_object(Bucket=s3_target.bucket, Key="repo/default/0/s/blobs//stray", Body=b"x")
    write_keys(store, n=50, seed=3)
    again = cli("backup", store, "--repo", repo, "-q", env=s3_target.env)
    assert again.returncode == 0, again.stderr
    gc = cli("gc", "--repo", repo, "--json", env=s3_target.env)
    assert gc.returncode == 0, gc.stderr
    assert all(r["skipped"] is None for r in gc.json()), gc.json()


def test_an_s3_url_with_a_fragment_names_the_same_prefix_whichever_client_lists_it(s3_target):
    """``s3://bucket/a#b`` is the prefix ``a#b`` for s3fs; the root taken without s3fs must not cut it at ``#``
    (it would name another repository)."""
    from blobstate.repository.backends import open_blob_store

    mapped = open_blob_store(f"s3://{s3_target.bucket}/a#b", storage_options=s3_target.storage_options)
    unmapped = open_blob_store(f"s3://{s3_target.bucket}/a#b",
                               storage_options={**s3_target.storage_options, "use_ssl": False})
    try:
        assert mapped.inner.root == unmapped.inner.root == f"{s3_target.bucket}/a#b"
    finally:
        mapped.close()
        unmapped.close()
