"""Issue 39 case 8: two repositories that differ only in their endpoint (``s3://bucket/repo`` on two S3 servers,
two moto servers here) shared one work directory, journal and lock on a host: the host-local state was keyed by the
URL without its query (``workdir.repository_hash``) and recovery checked a journal's commits against the URL
(``recover._check_belongs``). A backup of X killed after its commit point, then `blobstate copy X->Y` on the same
host: the copy recovered X's commit against Y, X's next backup skipped its take-over, and X's committed index kept
its TTL mark (in native mode a lifecycle rule deletes it; in lease mode gc does). Now the work directory is keyed by
the repository's id from its marker, and a journal's commits name the repository id they belong to."""

from __future__ import annotations

import json
from pathlib import Path

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


def _legacy(work: Path, repo_url: str, store: str) -> Path:
    """Where a blobstate before issue 39 kept the store's work directory: under a hash of the URL."""
    from blobstate.local import workdir
    from blobstate.repository.backends import normalize_url

    return work / workdir.repository_hash(normalize_url(repo_url)) / "default" / "0" / store


def _keyed(work: Path, repo: Path, store: str) -> Path:
    marker = json.loads((repo / "blobstate-repository.json").read_text())
    return work / marker["repositoryId"] / "default" / "0" / store


def _as_an_older_blobstate_left_it(keyed: Path, legacy: Path) -> None:
    """Move a work directory to ``legacy``, its journal naming its local checkpoints there (as a blobstate from
    before wrote it)."""
    from blobstate.repository.host import reroot_journal

    legacy.parent.mkdir(parents=True, exist_ok=True)
    keyed.rename(legacy)
    reroot_journal(str(legacy), str(keyed), str(legacy))
    assert str(keyed) not in (legacy / "journal.log").read_text(errors="replace")


def test_an_interrupted_commit_in_a_work_directory_keyed_by_the_url_is_still_recovered(cli, tmp_path, work_base):
    """A host upgraded with a commit left open in a work directory of the old layout (keyed by the URL): the next
    backup moves the directory to its place under the repository's id and recovers the commit (its TTLs removed),
    never leaving it orphaned."""
    repo, store = tmp_path / "repo", tmp_path / "counts"
    store.mkdir()
    for text in ("one\n", "two\n"):
        (store / "a.txt").write_text(text)
        env = {} if text == "one\n" else {"BLOBSTATE_PLUGINS": "kill_plugin",
                                          "BLOBSTATE_TEST_KILL_AT": "CheckpointWritten"}
        cli("backup", store, "--repo", repo, "-q", env=env)
    keyed, legacy = _keyed(work_base, repo, "counts"), _legacy(work_base, str(repo), "counts")
    _as_an_older_blobstate_left_it(keyed, legacy)
    (store / "a.txt").write_text("three\n")
    assert cli("backup", store, "--repo", repo, "-q").returncode == 0
    assert keyed.is_dir() and not legacy.exists()
    with Repository.open(str(repo), create=False) as repository:
        history = repository.log.history(StoreKey("default", "0", "counts"))
        assert len(history) == 3
        assert [cp.generation for cp in history if repository.store.has_ttl(cp.index_blob_id)] == []


def test_a_work_directory_keyed_by_the_url_holding_another_repositorys_commit_is_left_to_recover(cli, tmp_path,
                                                                                                  work_base):
    """The old layout's directory at the URL of repository B holds a commit of repository A (the collision of case
    8): B's backup leaves it where it is and says so; `blobstate recover` (no options) still recovers it against A."""
    a, b, store = tmp_path / "a", tmp_path / "b", tmp_path / "counts"
    store.mkdir()
    (store / "a.txt").write_text("one\n")
    assert cli("backup", store, "--repo", a, "-q").returncode == 0
    (store / "a.txt").write_text("two\n")
    killed = cli("backup", store, "--repo", a, "-q", env={"BLOBSTATE_PLUGINS": "kill_plugin",
                                                          "BLOBSTATE_TEST_KILL_AT": "CheckpointWritten"})
    assert killed.returncode == -9
    legacy = _legacy(work_base, str(b), "counts")
    _as_an_older_blobstate_left_it(_keyed(work_base, a, "counts"), legacy)
    done = cli("-v", "backup", store, "--repo", b)
    assert done.returncode == 0, done.stderr
    assert legacy.is_dir() and "is left where it is" in done.stderr, done.stderr
    assert (legacy / "journal.log").is_file()
    recovered = cli("recover", "--json")
    assert recovered.returncode == 0, recovered.stderr
    with Repository.open(str(a), create=False) as repository:
        history = repository.log.history(StoreKey("default", "0", "counts"))
        assert len(history) == 2 and not repository.store.has_ttl(history[-1].index_blob_id)
