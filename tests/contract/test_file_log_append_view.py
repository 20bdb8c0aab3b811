"""Issue 31, Safety rule 15: the file log hands retention the listing its own append took right after the create
(``FileCheckpointLog.history_after_append``), once, only while it is fresh, and only for the append that took it."""

from __future__ import annotations

from blobstate.plugins.file_log import FileCheckpointLog
from blobstate.repository.backends import open_blob_store
from blobstate.testing.checkpoint_logs import make_checkpoint, new_key


def _log(tmp_path) -> FileCheckpointLog:
    return FileCheckpointLog(open_blob_store(f"file://{tmp_path}/repo"))


def test_the_view_is_the_appends_own_and_is_handed_out_once(tmp_path):
    log, key = _log(tmp_path), new_key()
    first = log.append(make_checkpoint(key), 0)
    second = log.append(make_checkpoint(key), 1)
    view = log.history_after_append(key, 60.0)
    assert [cp.checkpoint_id for cp in view] == [first.checkpoint_id, second.checkpoint_id]
    assert log.history_after_append(key, 60.0) is None  # once
    log.append(make_checkpoint(key), 2)
    assert log.history_after_append(key, 0.0) is None  # too old for a zero bound: the caller reads the log


def test_a_re_append_that_finds_its_record_never_gets_an_earlier_appends_view(tmp_path):
    """Writer A's delta-like commit leaves its view unused; its next record's create answer is lost and the
    re-append finds the record there ("ours"): the view left by the earlier append lacks that record, so retention
    would act on a log without it, and without a writer that appended after it."""
    log, other, key = _log(tmp_path), _log(tmp_path), new_key()
    log.append(make_checkpoint(key), 0)  # its view, never consumed (a commit without retention)
    record = make_checkpoint(key)
    other.append(record, 1)  # the create that landed while its answer was lost
    assert log.append(record, 1).generation == 2  # the re-append resolves it: ours
    assert log.history_after_append(key, 60.0) is None, "an earlier append's view was handed out"
