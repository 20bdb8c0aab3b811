"""Issue 39 case 8: two repositories that differ only in their endpoint (``s3://bucket/repo`` on two S3 servers,
two moto servers here) shared one work directory, journal and lock on a host: the host-local state was keyed by the
URL without its query (``workdir.repository_hash``) and recovery checked a journal's commits against the URL
(``recover._check_belongs``). A backup of X killed after its commit point, then `blobstate copy X->Y` on the same
host: the copy recovered X's commit against Y, X's next backup skipped its take-over, and X's committed index kept
its TTL mark (in native mode a lifecycle rule deletes it; in lease mode gc does). Now the work directory is keyed by
the repository's id from its marker, and a journal's commits name the repository id they belong to."""

from __future__ import annotations

import json

import boto3
import pytest
from cloud_servers import _moto_cmd, free_port, s3_options, start_server, stop_server

from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

BUCKET = "same-bucket-name"
URL = f"s3://{BUCKET}/repo"


@pytest.fixture
def two_endpoints(moto_server):
    port = free_port()
    second = start_server("moto-second", _moto_cmd(port), port, env={"AWS_DEFAULT_REGION": "us-east-1"},
                          probe="/moto-api/")
    try:
        for server in (moto_server, second):
            boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id="testing",
                         aws_secret_access_key="testing", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield s3_options(moto_server.endpoint), s3_options(second.endpoint)
    finally:
        stop_server(second)


def _env(options) -> dict[str, str]:  # noqa: ANN001
    return {"BLOBSTATE_STORAGE_OPTIONS": json.dumps(options), "AWS_DEFAULT_REGION": "us-east-1"}


def _options(side: str, options) -> list[str]:  # noqa: ANN001
    return [a for k, v in options.items() for a in (f"--{side}-option", f"{k}={v}")]


def test_two_repositories_at_one_url_keep_their_own_journals(two_endpoints, cli, tmp_path):
    x, y = two_endpoints
    store = tmp_path / "counts"
    store.mkdir()
    (store / "a.txt").write_text("one\n")
    assert cli("backup", store, "--repo", URL, "-q", env=_env(x)).returncode == 0
    (store / "a.txt").write_text("two\n")
    killed = cli("backup", store, "--repo", URL, "-q", env={**_env(x), "BLOBSTATE_PLUGINS": "kill_plugin",
                                                             "BLOBSTATE_TEST_KILL_AT": "CheckpointWritten"})
    assert killed.returncode == -9, killed.stderr
    copied = cli("copy", "--from", URL, *_options("from", x), "--to", URL, *_options("to", y))
    assert copied.returncode == 0, copied.stderr
    (store / "a.txt").write_text("three\n")
    assert cli("backup", store, "--repo", URL, "-q", env=_env(x)).returncode == 0

    key = StoreKey("default", "0", "counts")
    with Repository.open(URL, storage_options={**x, "skip_instance_cache": True}, create=False) as repo:
        history = repo.log.history(key)
        assert len(history) == 3
        held = [cp.generation for cp in history if repo.store.has_ttl(cp.index_blob_id)]
    assert held == [], f"committed indexes of X still carry a TTL (generations {held}): gc will delete them"
