"""``blobstate.commit.preview`` (``backup --dry-run``) on a real ``file://`` repository: what a backup would
upload, keep and drop against the latest snapshot, with nothing written to the repository or left in the work
directory; a latest index that does not read counts as none."""

from __future__ import annotations

import os

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.preview import preview_backup
from blobstate.local import workdir
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "counts")
CHUNK = 1 << 20


def _objects(repo: Repository) -> list[str]:
    return sorted(info.blob_id for info in repo.store.list(""))


def _data(tmp_path) -> str:  # noqa: ANN001
    data = tmp_path / "data"
    data.mkdir()
    (data / "same.txt").write_text("unchanged")
    (data / "edit.txt").write_text("before")
    (data / "gone.txt").write_text("deleted before the dry run")
    return str(data)


def test_a_first_backup_would_upload_every_file(repo, tmp_path):
    data = _data(tmp_path)
    preview = preview_backup(repo, data, key=KEY, store_type="dir", chunk_size=CHUNK, work_dir=str(tmp_path / "w"))
    assert preview.upload == ("edit.txt", "gone.txt", "same.txt") and preview.unchanged == 0
    assert preview.previous_checkpoint_id is None and preview.removed == ()
    assert preview.files_total == 3 and preview.bytes_total == preview.bytes_upload > 0
    assert repo.log.latest(KEY) is None


def test_the_diff_against_the_latest_snapshot_and_nothing_written(repo, tmp_path):
    data = _data(tmp_path)
    work = str(tmp_path / "w")
    with StoreCommitter(KEY, repo, store_type="dir", work_dir=work) as committer:
        committer.backup(data)
    latest = repo.log.latest(KEY)
    os.remove(os.path.join(data, "gone.txt"))
    with open(os.path.join(data, "edit.txt"), "w") as fh:
        fh.write("after, and longer")
    with open(os.path.join(data, "new.txt"), "w") as fh:
        fh.write("new")
    before = _objects(repo)
    local = sorted(os.listdir(workdir.checkpoints_dir(work)))
    preview = preview_backup(repo, data, key=KEY, store_type="dir", chunk_size=CHUNK, work_dir=work)
    assert preview.upload == ("edit.txt", "new.txt") and preview.unchanged == 1
    assert preview.removed == ("gone.txt",) and preview.previous_checkpoint_id == latest.checkpoint_id
    assert preview.bytes_upload == len("after, and longer") + len("new")
    assert _objects(repo) == before and repo.log.latest(KEY) == latest  # nothing committed
    assert sorted(os.listdir(workdir.checkpoints_dir(work))) == local  # its temporary checkpoint is gone
    assert preview.to_json()["dryRun"] is True


def test_a_latest_index_that_does_not_read_counts_as_none(repo, tmp_path):
    data = _data(tmp_path)
    with StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "w")) as committer:
        committer.backup(data)
    latest = repo.log.latest(KEY)
    repo.store.put(PutRequest(latest.index_blob_id, b"not an index"))
    fresh = Repository.open(repo.url, create=False)  # no index read yet in this process's view of it
    try:
        preview = preview_backup(fresh, data, key=KEY, store_type="dir", chunk_size=CHUNK,
                                 work_dir=str(tmp_path / "w"))
    finally:
        fresh.close()
    assert preview.previous_checkpoint_id is None and preview.unchanged == 0 and len(preview.upload) == 3
