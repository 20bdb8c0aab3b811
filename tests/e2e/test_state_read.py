"""Issue 32, without Spark: a store's keys and values read from the repository exactly as after batch N
(``blobstate.read_state``), its changes between two batches (``blobstate.read_changes``) and the ``blobstate state``
verbs, on real RocksDB stores committed the way the bindings commit them (snapshots and delta changelogs through
the commit engine; a group of two partitions through ``GroupCommitter``). Read only: the repository's files and
the caller's directories are left as they were."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
from rocksdict import Rdict

import blobstate
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.errors import BatchNotRetained
from blobstate.model import changelog
from blobstate.model.layout import DEFAULT_TTL_MS, MARKER
from blobstate.model.records import StoreKey
from blobstate.restoring.entries import Undecoded
from blobstate.worker import stage_changelog

P, D = changelog.PUT, changelog.DELETE


def _ops(batch: int, partition: int = 0) -> list[changelog.Op]:
    """Batch ``batch``'s writes: every type the bindings write, as keys and values, and a delete."""
    tag = f"p{partition}-"
    ops: list[changelog.Op] = [(P, f"{tag}count", batch), (P, f"{tag}k{batch}", f"v{batch}"),
                               (P, batch * 10 + partition, 1.5 * batch), (P, f"{tag}b".encode(), bytes([batch])),
                               (P, f"{tag}flag", batch % 2 == 0)]
    if batch >= 2:
        ops.append((D, f"{tag}k{batch - 2}", None))
    return ops


def _apply(state: dict, ops: list[changelog.Op]) -> dict:
    out = dict(state)
    for op, key, value in ops:
        if op == P:
            out[(type(key), key)] = value
        else:
            out.pop((type(key), key), None)
    return out


def _typed(entries) -> dict:
    """``{(type, key): value}``: 1, 1.0 and True are different keys."""
    out = {}
    for key, value in entries:
        assert (type(key), key) not in out
        out[(type(key), key)] = value
    return out


def cli(*args: str) -> SimpleNamespace:
    """``blobstate ARGS`` in this process (click's runner): exit code, stdout, stderr."""
    from click.testing import CliRunner

    from blobstate.cli import main

    result = CliRunner().invoke(main, [str(a) for a in args])
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


def _files(root) -> dict[str, bytes]:
    return {os.path.join(d, f): open(os.path.join(d, f), "rb").read() for d, _, names in os.walk(root)
            for f in names}


@pytest.fixture(params=["plain", "encrypted"])
def driver_store(tmp_path, monkeypatch, request):
    """A driver store as the binding commits it: deltas of batches 0-5, a snapshot of batch 3 (retain 1: the deltas
    of batches 0-3 are pruned), a pickled value some other program wrote in the snapshot; in a plain repository
    (compressed) and in an encrypted one (``BLOBSTATE_KEY_FILE`` for the writer and every reader after it). Returns
    the repository URL and the state after each batch."""
    repo, key = f"file://{tmp_path}/repo", StoreKey("j", "0", "s")
    if request.param == "encrypted":
        (tmp_path / "state.key").write_bytes(os.urandom(32))
        monkeypatch.setenv("BLOBSTATE_KEY_FILE", str(tmp_path / "state.key"))
    db = Rdict(str(tmp_path / "live"))
    states, state = {}, {}
    with StoreCommitter(key, repo, work_dir=str(tmp_path / "writer-work"), retain=1) as committer:
        deltas = DeltaCommitter(committer)
        for batch in range(6):
            ops = _ops(batch)
            deltas.commit_changelog(changelog.encode(ops), batch_id=batch, query_id="q")
            changelog.apply_ops(db, ops)
            state = _apply(state, ops)
            if batch == 1:
                db["pickled"] = {"made": "elsewhere"}  # in the store, never in a changelog: read as raw bytes
                state[(str, "pickled")] = Undecoded
            if batch == 3:
                db.flush(True)
                committer.backup(db, batch_id=3)
            states[batch] = dict(state)
    db.close()
    marker = json.loads((tmp_path / "repo" / MARKER).read_bytes())
    assert ("encryption" in marker) == (request.param == "encrypted")
    return repo, states


def _same(read: dict, expected: dict) -> None:
    assert set(read) == set(expected)
    for k, v in expected.items():
        if v is Undecoded:
            assert isinstance(read[k], Undecoded) and read[k].data[:1] == b"\x06"
        else:
            assert type(read[k]) is type(v) and read[k] == v, k


def test_read_state_at_the_newest_and_an_older_batch_and_the_changes_between(driver_store, tmp_path):
    repo, states = driver_store
    before = _files(tmp_path / "repo")
    _same(_typed(blobstate.read_state(repo=repo, job="j", store="s")), states[5])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _same(_typed(blobstate.read_state(repo=repo, job="j", store="s", batch_id=4, scratch_dir=str(scratch))),
          states[4])
    assert not os.listdir(scratch)  # the private copy is gone once read
    _same(_typed(blobstate.read_state(repo=repo, job="j", store="s", checkpoint="latest")), states[5])
    with pytest.raises(BatchNotRetained, match="the oldest readable batch is 3, the newest 5") as info:
        blobstate.read_state(repo=repo, job="j", store="s", batch_id=2)
    assert info.value.exit_code == 5
    # the change feed of batches 4..5 applied to the state after batch 3 gives the state after batch 5
    state = _typed(blobstate.read_state(repo=repo, job="j", store="s", batch_id=3))
    changes = list(blobstate.read_changes(repo=repo, job="j", store="s", from_batch=4, to_batch=5))
    assert [c.batch_id for c in changes] == [4] * len(_ops(4)) + [5] * len(_ops(5))
    assert [(c.op, c.key, c.value) for c in changes if c.batch_id == 4] == [
        ("put" if op == P else "delete", k, v) for op, k, v in _ops(4)]
    for c in changes:
        state = _apply(state, [(P if c.op == "put" else D, c.key, c.value)])
    _same(state, states[5])
    with pytest.raises(BatchNotRetained, match="changes of j/0/s in batches 2..5: the oldest readable batch is 4"):
        blobstate.read_changes(repo=repo, job="j", store="s", from_batch=2)
    assert _files(tmp_path / "repo") == before  # nothing written to the repository: no journal, no cleanup


def test_the_state_verbs(driver_store, tmp_path):
    repo, states = driver_store
    before = _files(tmp_path / "repo")
    dump = cli("state", "dump", "--repo", repo, "--job", "j", "--store", "s")
    assert dump.returncode == 0, dump.stderr
    lines = [json.loads(line) for line in dump.stdout.splitlines()]
    read = list(blobstate.read_state(repo=repo, job="j", store="s"))
    assert len(lines) == len(read) and all(line["partition"] is None for line in lines)
    for line, (key, value) in zip(lines, read, strict=True):  # the same entries, in the store's order
        assert line["key"] == ({"bytes": __import__("base64").b64encode(key).decode()} if isinstance(key, bytes)
                               else key)
        if isinstance(value, Undecoded):
            assert set(line["value"]) == {"raw"}
        elif not isinstance(value, bytes):
            assert line["value"] == value and type(line["value"]) is type(value)
    csv_out = cli("state", "dump", "--repo", repo, "--job", "j", "--store", "s", "--batch", "4", "--format", "csv")
    rows = csv_out.stdout.splitlines()
    assert rows[0] == "partition,key_type,key,value_type,value" and len(rows) == len(states[4]) + 1
    assert ",str,p0-count,int,4" in rows
    got = cli("state", "get", "p0-count", "--repo", repo, "--job", "j", "--store", "s", "--batch", "4")
    assert (got.returncode, got.stdout) == (0, "4\n")
    got = cli("state", "get", "40", "--key-type", "int", "--repo", repo, "--job", "j", "--store", "s", "--json")
    assert got.returncode == 0 and json.loads(got.stdout) == {"partition": None, "key": 40, "value": 1.5 * 4}
    missing = cli("state", "get", "nope", "--repo", repo, "--job", "j", "--store", "s")
    assert missing.returncode == 5 and "holds no key 'nope'" in missing.stderr
    wrong = cli("state", "dump", "--repo", repo, "--job", "j", "--store", "ss")
    assert wrong.returncode == 5 and "stores with checkpoints: j/0/s" in wrong.stderr, wrong.stderr
    old = cli("state", "dump", "--repo", repo, "--job", "j", "--store", "s", "--batch", "1")
    assert old.returncode == 5 and "the oldest readable batch is 3" in old.stderr and not old.stdout
    feed = cli("state", "changes", "--repo", repo, "--job", "j", "--store", "s", "--from", "5")
    assert [json.loads(line)["op"] for line in feed.stdout.splitlines()] == ["put"] * 5 + ["delete"]
    assert _files(tmp_path / "repo") == before


def test_a_group_of_partitions_read_one_by_one_and_together(tmp_path):
    repo, key = f"file://{tmp_path}/repo", StoreKey("j", "group", "g")
    states = {0: {}, 1: {}}
    per_batch = []
    with StoreCommitter(key, repo, work_dir=str(tmp_path / "writer-work")) as committer:
        groups = GroupCommitter(committer, num_partitions=2)
        for batch in range(3):
            entries = [stage_changelog(committer.repo, key, partition=p, batch_id=batch,
                                       data=changelog.encode(_ops(batch, p)), ttl_ms=DEFAULT_TTL_MS) for p in (0, 1)]
            groups.commit(entries, batch_id=batch, query_id="q")
            states = {p: _apply(states[p], _ops(batch, p)) for p in (0, 1)}
            per_batch.append(dict(states))
    _same(_typed(blobstate.read_state(repo=repo, job="j", task="group", store="g", partition=1)), per_batch[2][1])
    _same(_typed(blobstate.read_state(repo=repo, job="j", task="group", store="g", batch_id=1)),
          {**per_batch[1][0], **per_batch[1][1]})
    with pytest.raises(blobstate.ConfigurationError, match="partitions 0..1, not 2"):
        blobstate.read_state(repo=repo, job="j", task="group", store="g", partition=2)
    feed = list(blobstate.read_changes(repo=repo, job="j", task="group", store="g", from_batch=2))
    assert [(c.batch_id, c.partition) for c in feed] == [(2, 0)] * 6 + [(2, 1)] * 6
    dump = cli("state", "dump", "--repo", repo, "--job", "j", "--task", "group", "--store", "g")
    lines = [json.loads(line) for line in dump.stdout.splitlines()]
    assert sorted({line["partition"] for line in lines}) == [0, 1] and len(lines) == sum(
        len(per_batch[2][p]) for p in (0, 1))
    got = cli("state", "get", "p1-k2", "--repo", repo, "--job", "j", "--task", "group", "--store", "g", "--json")
    assert json.loads(got.stdout) == {"partition": 1, "key": "p1-k2", "value": "v2"}
