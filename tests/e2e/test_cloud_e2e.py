"""End to end through the ``blobstate`` CLI (real subprocesses) against moto S3, azurite and the GCS emulator:
backup -> incremental backup -> restore -> verify -> gc; two writers racing on one store key; storage options
from the URL and the environment; credentials never in output, journal or index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from fixtures_core import cli_env, read_all, write_keys

from blobstate.config import options as so
from blobstate.errors import ConfigurationError
from blobstate.repository.backends import open_blob_store


def _ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result


@pytest.mark.parametrize("ttl_mode", [pytest.param("lease", marks=pytest.mark.slow), "native"])
def test_cli_cycle(cloud_target, ttl_mode, tmp_path, cli):
    db, dest = tmp_path / "db", tmp_path / "restored"
    env = {**cloud_target.env, "BLOBSTATE_TTL_MODE": ttl_mode}  # the commands that keep TTLs read it
    common = ["--repo", cloud_target.url]
    items = write_keys(db, n=3000, value_size=200, seed=1)
    first = _ok(cli("backup", str(db), *common, "--store", "db", "--json", "-q", env=env)).json()
    assert first["generation"] == 1 and first["filesUploaded"] == first["filesTotal"]

    items.update(write_keys(db, n=500, value_size=200, seed=2, start=10_000))
    second = _ok(cli("backup", str(db), *common, "--store", "db", "--json", "-q", env=env)).json()
    assert second["generation"] == 2
    assert second["filesUploaded"] < second["filesTotal"], "the second backup must be incremental"
    assert second["bytesUploaded"] < second["bytesTotal"]

    listed = _ok(cli("list", *common, "--store", "db", "--json", env=env)).json()
    assert [row["checkpointId"] for row in listed] == [first["checkpointId"], second["checkpointId"]]

    _ok(cli("restore", str(dest), *common, "--store", "db", "-q", env=env))
    assert read_all(dest) == items
    _ok(cli("verify", *common, "--store", "db", env=env))

    gc = _ok(cli("gc", *common, "--json", env=env)).json()
    assert all(not r["expiredDeleted"] and not r["orphansDeleted"] for r in gc)  # nothing is garbage yet
    store = open_blob_store(cloud_target.url, storage_options=cloud_target.storage_options, ttl_mode=ttl_mode)
    assert not [b for b in store.list("default/0/db") if store.has_ttl(b.blob_id)], "TTL left after commit"
    # after the TTL, a gc run from far in the future still keeps everything the snapshots reference
    later = int(time.time() * 1000) + 10 * 86_400_000
    _ok(cli("gc", *common, "--now", str(later), env=env))
    _ok(cli("verify", *common, "--store", "db", env=env))


def _checkpoint_objects(target) -> list[str]:
    store = open_blob_store(target.url, storage_options=target.storage_options)
    return sorted(b.blob_id for b in store.list("checkpoints"))


@pytest.mark.parametrize("target_name", ["s3", "azure"])
def test_two_writers_race_exactly_one_wins(target_name, request, tmp_path):
    target = request.getfixturevalue(f"{target_name}_target")
    race_dir = tmp_path / "race"
    race_dir.mkdir()
    procs, dbs = [], {}
    for i in range(2):
        db = tmp_path / f"writer{i}" / "state"
        dbs[i] = write_keys(db, n=1000, value_size=50, seed=100 + i)
        env = cli_env(tmp_path / f"work{i}", **target.env, BLOBSTATE_PLUGINS="cloud_servers",
                      BLOBSTATE_TEST_RACE_DIR=str(race_dir), BLOBSTATE_TEST_RACE_WRITERS="2")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "blobstate.cli", "backup", str(db), "--repo", target.url, "--store", "state",
             "-q"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outcomes = [(p.wait(timeout=180), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 4], outcomes
    winner = next(i for i, (code, _, _) in enumerate(outcomes) if code == 0)
    loser_err = outcomes[1 - winner][2]
    assert "Fenced" in loser_err, loser_err
    assert _checkpoint_objects(target) == ["checkpoints/default/0/state/00000000000000000001.json"]
    dest = tmp_path / "restored"
    restore = subprocess.run([sys.executable, "-m", "blobstate.cli", "restore", str(dest), "--repo", target.url,
                              "--store", "state", "-q"], env=cli_env(tmp_path / "work-r", **target.env),
                             capture_output=True, text=True, timeout=180)
    assert restore.returncode == 0, restore.stderr
    assert outcomes[winner][1].strip()  # the winner printed its checkpoint id
    assert read_all(dest) == dbs[winner]


def test_storage_options_from_url_query_and_env(s3_target, tmp_path, cli):
    """The endpoint in the URL's query, the credentials in BLOBSTATE_STORAGE_OPTIONS: the CLI reaches moto."""
    db = tmp_path / "db"
    write_keys(db, n=100)
    endpoint = s3_target.storage_options["endpoint_url"]
    url = f"{s3_target.url}?endpoint_url={endpoint}"
    env = {**s3_target.env, "BLOBSTATE_STORAGE_OPTIONS": json.dumps({"key": "testing", "secret": "testing"})}
    _ok(cli("backup", str(db), "--repo", url, "--store", "db", "-q", env=env))
    listed = _ok(cli("list", "--repo", s3_target.url, "--store", "db", "--json", env=s3_target.env)).json()
    assert len(listed) == 1


def test_credentials_never_in_output_journal_or_index(azure_target, tmp_path, cli, work_base):
    db = tmp_path / "db"
    write_keys(db, n=100)
    secret_key = so.from_env(azure_target.env)["connection_string"].split("AccountKey=")[1].split(";")[0]
    out = _ok(cli("backup", str(db), "--repo", azure_target.url, "--store", "db", env=azure_target.env))
    assert secret_key not in out.stdout + out.stderr
    for root, _, files in os.walk(work_base):  # journal, checksum cache, local checkpoints' metadata
        for name in files:
            path = os.path.join(root, name)
            if name.endswith((".sst", ".log")) or "MANIFEST" in name:
                continue
            with open(path, "rb") as fh:
                assert secret_key.encode() not in fh.read(), path
    store = open_blob_store(azure_target.url, storage_options=azure_target.storage_options)
    for info in store.list(""):
        if info.blob_id.endswith(".json"):
            assert secret_key.encode() not in store.get_bytes(info.blob_id), info.blob_id
    # a refused call (a wrong account key: azurite answers 403) names the repository but not the key
    wrong_key = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmc="
    bad = azure_target.storage_options["connection_string"].replace(secret_key, wrong_key)
    env = {"BLOBSTATE_STORAGE_OPTIONS": json.dumps({"connection_string": bad}), "BLOBSTATE_RETRY_ATTEMPTS": "1"}
    failed = cli("list", "--repo", azure_target.url, "--store", "db", env=env)
    assert failed.returncode != 0
    assert wrong_key not in failed.stdout + failed.stderr and secret_key not in failed.stdout + failed.stderr
    assert azure_target.bucket in failed.stderr or "error" in failed.stderr


# -- storage options (unit) -------------------------------------------------------------------------------------
def test_parse_options_coerces_and_nests():
    opts = so.parse_options(["anon=false", "client_kwargs.region_name=eu-west-1", "max_concurrency=16",
                             "ratio=0.5", "token=null", 'tags={"a": 1}', "name=007x", 'zip="123"'])
    assert opts == {"anon": False, "client_kwargs": {"region_name": "eu-west-1"}, "max_concurrency": 16,
                    "ratio": 0.5, "token": None, "tags": {"a": 1}, "name": "007x", "zip": "123"}
    with pytest.raises(ConfigurationError) as err:
        so.parse_option("secretvalue")
    assert "secretva" not in str(err.value) and "name=value" in str(err.value)  # never echoes the value
    with pytest.raises(ConfigurationError):
        so.parse_options(["a=1", "a.b=2"])


def test_resolve_precedence_env_url_explicit():
    env = {"BLOBSTATE_STORAGE_OPTIONS": json.dumps({"endpoint_url": "http://env", "key": "k-env",
                                                    "client_kwargs": {"a": 1}})}
    url, opts = so.resolve("s3://b/p?endpoint_url=http://url&client_kwargs.b=2", ["key=k-cli"], environ=env)
    assert url == "s3://b/p"
    assert opts == {"endpoint_url": "http://url", "key": "k-cli", "client_kwargs": {"a": 1, "b": 2}}
    assert so.resolve("file:///tmp/a?b", None, environ={}) == ("file:///tmp/a?b", {})
    with pytest.raises(ConfigurationError):
        so.from_env({"BLOBSTATE_STORAGE_OPTIONS": "[1, 2]"})


def test_redact():
    conn = "DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=c2VjcmV0a2V5;BlobEndpoint=http://h:1/dev;"
    text = so.redact(f"cannot open {conn} via https://user:pw@host/x?sig=abcd1234&sv=2020 token: tok123456")
    for secret in ("c2VjcmV0a2V5", "user:pw", "abcd1234", "tok123456"):
        assert secret not in text
    assert "AccountName=dev" in text and "sv=2020" in text
    opts = {"key": "AKIA", "secret": "s3cr3t", "endpoint_url": "http://e", "client_kwargs": {"aws_session_token": "t"}}
    assert so.redact(opts) == {"key": "***", "secret": "***", "endpoint_url": "http://e",
                               "client_kwargs": {"aws_session_token": "***"}}
    assert so.redact("the value s3cr3t-long leaked", secrets=["s3cr3t-long"]) == "the value *** leaked"
