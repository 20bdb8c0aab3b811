"""``blobstate.commit.session``: one session per store work directory at a time (``CommitInProgressError`` while
another holds its lock, free again once it closes), every ``CommitStarted`` stamped with the repository id, an
observer told of an event only once it is in the journal, and compaction keeping only the open commits."""

from __future__ import annotations

import os

import pytest

from blobstate.commit.session import StoreSession
from blobstate.errors import CommitInProgressError
from blobstate.journal import events as ev
from blobstate.journal.file import Journal
from blobstate.local import workdir
from blobstate.model.records import StoreKey
from blobstate.plugin.hookspecs import hookimpl
from blobstate.plugin.manager import get_plugin_manager

KEY = StoreKey("job", "0", "counts")
RID = "0123456789abcdef0123456789abcdef"


def _started(commit_id: str, repository_id: str = "") -> ev.CommitStarted:
    return ev.CommitStarted(commit_id=commit_id, time_ms=1, store_key=str(KEY), expected_generation=0,
                            repository_id=repository_id)


def test_one_session_per_work_directory_at_a_time(tmp_path):
    work = str(tmp_path / "w")
    with StoreSession(KEY, work) as first:
        with pytest.raises(CommitInProgressError, match="another process is committing job/0/counts"):
            StoreSession(KEY, work)
        first.close()
        first.close()  # idempotent
        with StoreSession(KEY, work):
            pass
    assert os.path.isdir(workdir.checkpoints_dir(work))


def test_a_commit_is_stamped_with_the_repository_id_unless_it_names_one(tmp_path):
    with StoreSession(KEY, str(tmp_path / "w"), repository_id=RID) as session:
        session.record(_started("c1"))
        session.record(_started("c2", "f" * 32))
        states = session.states()
    assert states["c1"].repository_id == RID and states["c2"].repository_id == "f" * 32


def test_an_observer_sees_an_event_only_once_it_is_in_the_journal(tmp_path):
    seen = []
    journal_path = os.path.join(str(tmp_path / "w"), workdir.JOURNAL)

    class Observer:
        @hookimpl
        def blobstate_journal_event(self, event, store_key):  # noqa: ANN001, ANN201
            on_disk = [e.commit_id for e in Journal(journal_path).read().events]
            seen.append((event.commit_id, store_key, event.commit_id in on_disk))

    manager = get_plugin_manager()
    name = manager.register(Observer(), "test-session-observer")
    try:
        with StoreSession(KEY, str(tmp_path / "w")) as session:
            session.record(_started("c1"), sync=True)
    finally:
        manager.unregister(name=name)
    assert seen == [("c1", KEY, True)]


def test_compaction_keeps_only_the_open_commits(tmp_path):
    with StoreSession(KEY, str(tmp_path / "w")) as session:
        session.record(_started("done"))
        session.record(ev.CommitCompleted(commit_id="done", time_ms=2))
        session.record(_started("open"))
        session.compact()
        assert list(session.states()) == ["open"]
    events = Journal(os.path.join(str(tmp_path / "w"), workdir.JOURNAL)).read().events
    assert [e.commit_id for e in events] == ["open"]
