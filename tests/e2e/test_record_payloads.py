"""Issue 39 case 9: a delta record carries its batch's keys and values when its changelog goes inline. The INFO step
log (``blobstate.plugins.steplog``: ``-v``, or a driver logging at INFO) printed ``CheckpointAppending`` with the
whole record, and the journal on disk held the same bytes, of an encrypted repository too. Now no step log carries a
record, and an encrypted repository's journal holds the record sealed under the data key, from which recovery still
re-appends it (a real writer SIGKILLed right after it journaled the record)."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_core import SUPPORT_DIR, cli_env

import blobstate
from blobstate.codec.keys import KeyConfig
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

SECRET = "inline-value-7e1f0c2a-kept-secret"
KEY = StoreKey("job", "0", "deltas")


def shows(text: bytes, secret: str) -> bool:
    """Whether ``text`` holds ``secret`` as it is, or inside any base64 run of it (a record's inline changelog is
    base64 in its JSON)."""
    if secret.encode() in text:
        return True
    for token in re.findall(rb"[A-Za-z0-9+/]{16,}={0,2}", text):
        for cut in range(4):  # a run may start inside a base64 quantum of a longer one
            piece = token[cut:]
            try:
                decoded = base64.b64decode(piece[: len(piece) // 4 * 4])
            except (binascii.Error, ValueError):
                continue
            if secret.encode() in decoded:
                return True
    return False


def test_the_check_sees_an_inline_changelog_in_a_record() -> None:
    record = json.dumps({"changelogInline": base64.b64encode(changelog.encode(
        [(changelog.PUT, b"k", SECRET.encode())])).decode()}).encode()
    assert shows(record, SECRET) and not shows(record.replace(b"c", b"C"), SECRET)


@pytest.fixture
def key_file(tmp_path: Path) -> str:
    path = tmp_path / "k.key"
    path.write_bytes(os.urandom(32))
    path.chmod(0o600)
    return str(path)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_no_step_log_carries_a_record_payload(tmp_path, caplog, key_file, encrypted) -> None:
    keys = KeyConfig(key_file=key_file) if encrypted else KeyConfig()
    caplog.set_level(logging.INFO, logger="blobstate.steps")
    with StoreCommitter(KEY, Repository.open(str(tmp_path / "repo"), key_config=keys),
                        work_dir=str(tmp_path / "work")) as committer:
        data = changelog.encode([(changelog.PUT, b"route-1", SECRET.encode())])
        done = DeltaCommitter(committer).commit_changelog(data, batch_id=1, query_id="q")
        assert done.checkpoint.changelog_inline == data  # the record carries the batch's values
        committer.repo.close()
    assert "CheckpointAppending" in caplog.text and "CommitCompleted" in caplog.text  # the steps were logged
    assert not shows(caplog.text.encode(), SECRET), "a step log line carries the record's payload"


def test_an_encrypted_repository_journals_no_plaintext_payload_and_recovers_from_it(tmp_path, key_file,
                                                                                    monkeypatch) -> None:
    repo, work_dir = str(tmp_path / "repo"), tmp_path / "work" / "deltas"
    blobstate.init(repo=repo, encrypt=True, key_file=key_file)
    config = {"mode": "deltas", "url": repo, "options": {}, "job": KEY.job, "task": KEY.task, "store": KEY.store,
              "work_dir": str(work_dir), "ttl_ms": 86_400_000, "retain": 3, "batches": [1], "value": SECRET}
    killed = subprocess.run([sys.executable, os.path.join(SUPPORT_DIR, "commit_child.py"), json.dumps(config)],
                            capture_output=True, text=True, timeout=300,
                            env=cli_env(tmp_path / "work", BLOBSTATE_KEY_FILE=key_file, BLOBSTATE_PLUGINS="kill_plugin",
                                        BLOBSTATE_TEST_KILL_AT="CheckpointAppending"))
    assert killed.returncode == -9, killed.stderr
    journal = (work_dir / "journal.log").read_bytes()
    assert b"CheckpointAppending" in journal
    assert not shows(journal, SECRET), "the journal holds the record's payload in plaintext"
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", key_file)
    outcome = blobstate.recover(repo=repo, job=KEY.job, task=KEY.task, store=KEY.store, work_dir=str(work_dir))
    assert [a.name for a, _ in outcome] == ["resolve"] and outcome[0][1].startswith("finished"), outcome
    with Repository.open(repo, create=False) as repository:
        (record,) = repository.log.history(KEY)
        assert record.batch_id == 1
        assert SECRET.encode() in repository.read_changelog(record)
