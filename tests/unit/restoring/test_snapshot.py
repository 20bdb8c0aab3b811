"""``blobstate.restoring.snapshot`` on a real ``file://`` repository: a directory brought to exactly a snapshot's
entries (extra files removed, changed ones replaced, unchanged ones kept), a destination that no restore of this
store made refused without ``force``, a dry run that writes nothing, and a damaged blob that leaves the destination
as it was."""

from __future__ import annotations

import os

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.errors import ChecksumMismatch, RestoreRefused
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.backends import open_local_store
from blobstate.repository.repo import Repository
from blobstate.restoring.snapshot import recorded_store_type, restore_snapshot

KEY = StoreKey("job", "0", "counts")
FILES = {"a.txt": "alpha" * 100, "sub/b.txt": "beta" * 100, "sub/deeper/c.bin": "gamma" * 100}


def _tree(root) -> dict[str, str]:  # noqa: ANN001
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path) as fh:
                out[os.path.relpath(path, root)] = fh.read()
    return out


@pytest.fixture
def snapshot(tmp_path):
    repo = Repository.open(f"file://{tmp_path}/repo", create=True)
    data = tmp_path / "data"
    for name, text in FILES.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(text)
    with StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "w")) as committer:
        committer.backup(str(data))
    yield repo, repo.log.latest(KEY)
    repo.close()


def _restore(repo, cp, dest, tmp_path, **kw):  # noqa: ANN001, ANN202
    return restore_snapshot(repo, cp, str(dest), local_store=open_local_store("dir"), work_dir=str(tmp_path / "rw"),
                            **kw)


def test_a_new_destination_gets_exactly_the_snapshot(snapshot, tmp_path):
    repo, cp = snapshot
    assert recorded_store_type(repo, cp) == "dir"
    result = _restore(repo, cp, tmp_path / "dest" / "nested", tmp_path)
    assert _tree(tmp_path / "dest" / "nested") == FILES
    assert result.files_total == 3 and result.files_downloaded == 3 and result.checkpoint == cp


def test_a_second_restore_keeps_what_is_right_and_fixes_the_rest(snapshot, tmp_path):
    repo, cp = snapshot
    dest = tmp_path / "dest"
    _restore(repo, cp, dest, tmp_path)
    (dest / "a.txt").write_text("changed by the job")
    (dest / "extra.txt").write_text("written after the snapshot")
    result = _restore(repo, cp, dest, tmp_path)  # this store's restore made it: no force needed
    assert _tree(dest) == FILES
    assert result.files_removed == 1 and result.files_kept == 2 and result.files_downloaded == 1


def test_a_destination_no_restore_made_is_refused_unless_forced(snapshot, tmp_path):
    repo, cp = snapshot
    dest = tmp_path / "precious"
    dest.mkdir()
    (dest / "mine.txt").write_text("not blobstate's")
    with pytest.raises(RestoreRefused, match="is not empty \\(1 entry: 'mine.txt'\\)"):
        _restore(repo, cp, dest, tmp_path)
    assert _tree(dest) == {"mine.txt": "not blobstate's"}
    dry = _restore(repo, cp, dest, tmp_path, dry_run=True)
    assert dry.dry_run and dry.needs_force and ("remove", "mine.txt") in {(a, p) for a, p in dry.changes}
    assert _tree(dest) == {"mine.txt": "not blobstate's"}  # a dry run writes nothing
    _restore(repo, cp, dest, tmp_path, force=True)
    assert _tree(dest) == FILES


def test_a_damaged_blob_leaves_the_destination_as_it_was(snapshot, tmp_path):
    repo, cp = snapshot
    dest = tmp_path / "dest"
    _restore(repo, cp, dest, tmp_path)
    (dest / "a.txt").write_text("the job's newer state")
    blobs = [i.blob_id for i in repo.store.list(KEY.prefix) if layout.is_blob_of(KEY, i.blob_id)]
    index = repo.read_index(cp)
    damaged = next(b.blob_id for b in index.files()["a.txt"].blobs)
    assert damaged in blobs
    repo.store.put(PutRequest(damaged, b"x" * 500))
    with pytest.raises(ChecksumMismatch):
        _restore(repo, cp, dest, tmp_path)
    assert _tree(dest) == {**FILES, "a.txt": "the job's newer state"}
