"""A broken or misspelled plugin is one broken plugin, listed by `blobstate plugins`, never a global failure;
`blobstate_configure` receives the effective configuration; checkpoint log plugins receive their options; the
conformance kit needs nothing but pytest."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from dists import make_dist, plugin_env

ROOT = Path(__file__).resolve().parents[2]

MISSPELLED = '''
from blobstate import hookimpl

@hookimpl
def blobstate_blobstores():          # misspelled: blobstate_blob_stores
    return []
'''
CONFIGURE_RAISES = '''
from blobstate import hookimpl

@hookimpl
def blobstate_configure(config):
    raise RuntimeError("configure exploded")
'''
DUPLICATE_NAME = '''
from blobstate import BlobStoreSpec, hookimpl

@hookimpl
def blobstate_blob_stores():
    return [BlobStoreSpec(name="fsspec", schemes=("dupe",), factory="os:getcwd")]
'''
RECORD_CONFIG = '''
import json, os
from blobstate import hookimpl

@hookimpl
def blobstate_configure(config):
    with open(os.environ["CONFIG_OUT"], "w") as fh:
        json.dump(config, fh, default=str)
'''


@pytest.fixture
def bad_site(tmp_path) -> Path:
    root = tmp_path / "site"
    make_dist(root, "typo-plugin", "0.1", "typoplug", MISSPELLED)
    make_dist(root, "configure-fails", "0.2", "conffail", CONFIGURE_RAISES)
    make_dist(root, "dupe-name", "0.3", "dupename", DUPLICATE_NAME)
    return root


def test_broken_plugins_are_listed_and_break_nothing_else(cli, bad_site, tmp_path):
    env = plugin_env(bad_site)
    listed = cli("plugins", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    payload = listed.json()
    plugins = {p["name"]: p for p in payload["plugins"]}
    assert plugins["typoplug"]["status"] == "broken" and "blobstate_blobstores" in plugins["typoplug"]["error"]
    assert plugins["conffail"]["status"] == "broken" and "configure exploded" in plugins["conffail"]["error"]
    assert any("'fsspec' is provided twice" in p for p in payload["problems"])
    assert plugins["fsspec"]["status"] == "ok"
    text = cli("plugins", env=env)
    assert text.returncode == 0 and "typoplug  [typo-plugin 0.1]  BROKEN" in text.stdout
    store = tmp_path / "s"
    store.mkdir()
    (store / "a").write_bytes(b"a")
    repo = tmp_path / "repo"
    backup = cli("backup", store, "--repo", repo, "--store-type", "dir", env=env)
    assert backup.returncode == 0, backup.stderr
    assert cli("list", "--repo", repo, env=env).returncode == 0
    assert cli("verify", "--repo", repo, env=env).returncode == 0


def test_blobstate_configure_receives_the_effective_configuration(cli, tmp_path, work_base):
    site = tmp_path / "site"
    make_dist(site, "config-recorder", "1.0", "confrec", RECORD_CONFIG)
    out = tmp_path / "config.json"
    store = tmp_path / "s"
    store.mkdir()
    (store / "a").write_bytes(b"a")
    secret = "SuperSecretValue123"
    result = cli("backup", store, "--repo", tmp_path / "repo", "--retain", "5", "--ttl", "2h", "--chunk-size",
                 "1MiB", "--storage-option", f"secret={secret}", "--store-type", "dir",
                 env=plugin_env(site, CONFIG_OUT=str(out)))
    assert result.returncode == 0, result.stderr
    config = json.loads(out.read_text())
    assert config["command"] == "backup"
    assert (config["repo"], config["retain"], config["ttl"], config["chunk_size"]) == (
        str(tmp_path / "repo"), 5, 2 * 3600 * 1000, 1 << 20)
    assert (config["job"], config["task"], config["store"], config["store_type"]) == ("default", "0", None, "dir")
    assert config["work_base"] == str(work_base) and config["max_concurrency"] == 8
    assert config["storage_options"] == {"secret": "***"} and secret not in out.read_text()
    assert config["BLOBSTATE_WORK_DIR"] == str(work_base)  # the variables as before


def test_a_checkpoint_log_plugin_receives_its_options(cli, tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    (store / "a").write_bytes(b"a")
    db = tmp_path / "log.db"
    result = cli("backup", store, "--repo", tmp_path / "repo", "--log", f"sqlite:///{db}",
                 "--log-option", "table=my_checkpoints", "--store-type", "dir")
    assert result.returncode == 0, result.stderr
    import sqlite3

    with sqlite3.connect(db) as conn:
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type='table'")}
        assert "my_checkpoints" in tables
        assert conn.execute("select count(*) from my_checkpoints").fetchone()[0] == 1
    listed = cli("list", "--repo", tmp_path / "repo", "--log", f"sqlite:///{db}", "--log-option",
                 "table=my_checkpoints", "--json")
    assert [r["checkpointId"] for r in listed.json()] == [result.stdout.strip()]


def test_the_testing_extra_is_only_pytest_and_the_kit_needs_nothing_else():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [req.split(">")[0].split("=")[0] for req in extras["testing"]] == ["pytest"]
    blocked = ["moto", "boto3", "botocore", "s3fs", "gcsfs", "adlfs", "gcp_storage_emulator", "ruff", "kafka",
               "sqlalchemy", "pyspark", "hypothesis"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None  # importing any of these now fails\n"
        "import blobstate.testing.blobstores, blobstate.testing.checkpoint_logs, blobstate.testing.local_stores\n"
        "print('ok')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_the_plugin_guide_states_the_contracts_plugin_authors_asked_about():
    text = " ".join((ROOT / "docs" / "plugins.md").read_text().split())
    assert "return the number of bytes written" in text  # get()
    assert "is the **stored** size in bytes" in text  # list() sizes
    assert "**Thread safety**: one store instance is called from several threads at once" in text
    assert "install `blobstate[testing]`" in text
    assert "`--log-option KEY=VALUE`" in text and "the Python API's names" in text
