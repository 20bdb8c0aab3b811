"""``blobstate.restoring.chain`` on a real RocksDB and a ``file://`` repository: ``plan`` picks the snapshot below
the wanted batch and the deltas after it, ``restore_chain`` restores the snapshot then replays the deltas in batch
order (the RocksDB holds exactly the state after that batch), a chain of deltas alone starts from an empty store
(``force`` to clear a busy destination), and deltas are refused for a store that is not RocksDB."""

from __future__ import annotations

import pytest
from rocksdict import AccessType, Rdict

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.errors import ConfigurationError, NothingToRestore, RestoreRefused
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.backends import open_local_store
from blobstate.repository.repo import Repository
from blobstate.restoring.chain import plan, restore_chain

KEY = StoreKey("job", "0", "events")


def _contents(path) -> dict:  # noqa: ANN001
    db = Rdict(str(path), access_type=AccessType.read_only())
    try:
        return dict(db.items())
    finally:
        db.close()


@pytest.fixture(scope="module")
def chain_repo(tmp_path_factory):
    """Deltas of batches 0..3 (batch b sets ``n`` to b and adds ``seen-b``), a snapshot after batch 2; the URL and
    each batch's state."""
    tmp = tmp_path_factory.mktemp("chain")
    url, after = f"file://{tmp}/repo", {}
    db = Rdict(str(tmp / "live"))
    with StoreCommitter(KEY, url, work_dir=str(tmp / "w"), retain=4) as committer:
        deltas = DeltaCommitter(committer)
        for b in range(4):
            ops = [(changelog.PUT, "n", b), (changelog.PUT, f"seen-{b}", True)]
            deltas.commit_changelog(changelog.encode(ops), batch_id=b, query_id="q")
            changelog.apply_ops(db, ops)
            after[b] = dict(db.items())
            if b == 2:
                committer.upload(committer.checkpoint(db, batch_id=b, query_id="q"))
    db.close()
    return url, after


@pytest.fixture
def repo(chain_repo):
    with Repository.open(chain_repo[0], create=False) as repository:
        yield repository


def _restore(repo, chain, dest, **kw):  # noqa: ANN001, ANN202
    return restore_chain(repo, chain, str(dest), local_store=open_local_store("rocksdb"), store_type="rocksdb", **kw)


def test_the_newest_state_is_the_snapshot_then_the_deltas_after_it(repo, chain_repo, tmp_path):
    chain = plan(repo, KEY)
    assert chain.snapshot.batch_id == 2 and [d.batch_id for d in chain.deltas] == [3] and chain.upto == 3
    result = _restore(repo, chain, tmp_path / "db", work_dir=str(tmp_path / "w"))
    assert (result.deltas_applied, result.last_batch_id, result.batch_id) == (1, 3, 3)
    assert _contents(tmp_path / "db") == chain_repo[1][3]


def test_a_state_below_the_oldest_snapshot_is_replayed_from_an_empty_store(repo, chain_repo, tmp_path):
    chain = plan(repo, KEY, max_batch_id=1)
    assert chain.snapshot is None and [d.batch_id for d in chain.deltas] == [0, 1]
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "leftover").write_text("x")
    dry = _restore(repo, chain, busy, dry_run=True)
    assert dry.needs_force and (busy / "leftover").exists()
    with pytest.raises(RestoreRefused, match="starts from an empty store"):
        _restore(repo, chain, busy)
    assert _restore(repo, chain, busy, force=True).deltas_applied == 2
    assert _contents(busy) == chain_repo[1][1]


def test_a_delta_record_named_restores_the_state_after_its_batch(repo, chain_repo, tmp_path):
    first_delta = repo.log.history(KEY)[0]
    chain = plan(repo, KEY, checkpoint=first_delta.checkpoint_id)
    assert chain.upto == 0
    _restore(repo, chain, tmp_path / "db", force=True)
    assert _contents(tmp_path / "db") == chain_repo[1][0]


def test_deltas_are_refused_for_a_store_that_is_not_rocksdb_and_an_unknown_store_has_nothing(repo, tmp_path):
    with pytest.raises(ConfigurationError, match="RocksDB changelogs"):
        restore_chain(repo, plan(repo, KEY), str(tmp_path / "d"), local_store=open_local_store("dir"),
                      store_type="dir")
    assert not (tmp_path / "d").exists()
    with pytest.raises(NothingToRestore):
        plan(repo, StoreKey("job", "9", "none"))
