"""``blobstate.restoring.state`` on a real RocksDB and a ``file://`` repository: the state after any retained batch
read key by key (a snapshot, then the deltas after it), the changes of a range of batches that carry the state
after ``from - 1`` to the state after ``to``, and batches the repository does not hold refused naming the readable
ones."""

from __future__ import annotations

import pytest
from rocksdict import Rdict

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.errors import BatchNotRetained, ConfigurationError, NothingToRestore
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
from blobstate.restoring.state import change_plans, changes, entries, plan_changes, plan_state

KEY = StoreKey("job", "0", "counts")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Batches 0..4 on a real RocksDB, each a delta (odd ones in a blob of their own), a snapshot after batch 1;
    returns the repository URL and the state after each batch."""
    tmp = tmp_path_factory.mktemp("state")
    url, states = f"file://{tmp}/repo", {}
    db = Rdict(str(tmp / "db"))
    with StoreCommitter(KEY, url, work_dir=str(tmp / "w"), retain=5) as committer:
        inline, blob = DeltaCommitter(committer), DeltaCommitter(committer, inline_max_bytes=0)
        for b in range(5):
            view = changelog.StagedWrites(db)
            view[f"k{b}"] = b
            view["count"] = (view.get("count") or 0) + 1
            if b == 3:
                del view["k2"]
            (blob if b % 2 else inline).commit_changelog(changelog.encode(view.ops()), batch_id=b, query_id="q")
            changelog.apply_ops(db, view.ops())
            states[b] = dict(db.items())
            if b == 1:
                committer.upload(committer.checkpoint(db, batch_id=b, query_id="q"))
    db.close()
    return url, states


def _opener(url: str):  # noqa: ANN202
    return lambda: Repository.open(url, create=False)


def test_the_state_after_the_newest_batch_and_after_any_retained_one(written, tmp_path):
    url, states = written
    with Repository.open(url, create=False) as repo:
        newest = plan_state(repo, KEY)
        at_two = plan_state(repo, KEY, batch_id=2)
    assert newest.batch_id == 4 and newest.num_partitions == 0
    chain = newest.chains[None]
    assert chain.snapshot.batch_id == 1 and [d.batch_id for d in chain.deltas] == [2, 3, 4]
    assert dict(entries(newest, _opener(url), str(tmp_path))) == states[4]
    assert dict(entries(at_two, _opener(url), str(tmp_path))) == states[2]
    assert list(tmp_path.iterdir()) == []  # the private restores are gone


def test_the_changes_of_a_range_carry_one_state_to_the_other(written):
    url, states = written
    with Repository.open(url, create=False) as repo:
        plans = change_plans(repo, KEY, from_batch=2, to_batch=4)
    rows = list(changes(plans, _opener(url)))
    assert [r.batch_id for r in rows] == sorted(r.batch_id for r in rows) and {r.partition for r in rows} == {None}
    assert ("delete", "k2") in {(r.op, r.key) for r in rows if r.batch_id == 3}
    state = dict(states[1])
    for row in rows:
        if row.op == "put":
            state[row.key] = row.value
        else:
            state.pop(row.key, None)
    assert state == states[4]


def test_batches_the_repository_does_not_hold_are_refused_naming_the_readable_ones(written):
    url, _ = written
    with Repository.open(url, create=False) as repo:
        with pytest.raises(BatchNotRetained) as caught:
            change_plans(repo, KEY, from_batch=3, to_batch=9)
        assert (caught.value.oldest, caught.value.newest) == (0, 4) and "does not hold yet" in str(caught.value)
        with pytest.raises(BatchNotRetained):
            plan_state(repo, KEY, batch_id=9)
        with pytest.raises(ConfigurationError, match="from_batch 4 is after to_batch 2"):
            plan_changes(repo.log.history(KEY), from_batch=4, to_batch=2, what=str(KEY))
        with pytest.raises(ConfigurationError, match="driver store"):
            plan_state(repo, KEY, partitions=[1])
        with pytest.raises(NothingToRestore):
            plan_state(repo, StoreKey("job", "9", "none"))
