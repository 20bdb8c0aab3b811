"""The journal file (framing, torn tails, compaction), the projection and the recovery planner."""

from __future__ import annotations

import pytest

from blobstate.errors import CorruptJournalError
from blobstate.journal import events as ev
from blobstate.journal.file import MAGIC, Journal, decode, encode
from blobstate.journal.projection import CommitPhase, project
from blobstate.journal.recovery import AbortCommit, FinishCommit, plan_recovery


def _commit_events(cid: str, upto: type[ev.Event] | None = None) -> list[ev.Event]:
    seq = [
        ev.CommitStarted(cid, 1, "j/t/s", 4, 9),
        ev.LocalCheckpointCreated(cid, 2, f"/tmp/{cid}"),
        ev.UploadsPlanned(cid, 3, ("j/t/s/blobs/a", "j/t/s/blobs/b"), "j/t/s/indexes/i.json", 30),
        ev.BlobUploaded(cid, 4, "j/t/s/blobs/a", 10),
        ev.BlobUploaded(cid, 5, "j/t/s/blobs/b", 20),
        ev.IndexUploaded(cid, 6, "j/t/s/indexes/i.json", 77, 100),
        ev.CheckpointWritten(cid, 7, 5),
        ev.TtlRemoved(cid, 8, ("j/t/s/blobs/a",)),
        ev.BlobsDeleted(cid, 9, ("j/t/s/blobs/old",), ("cp0",)),
        ev.LocalCheckpointsPruned(cid, 10, ("/tmp/old",)),
        ev.CommitCompleted(cid, 11),
    ]
    if upto is None:
        return seq
    return seq[: next(i for i, e in enumerate(seq) if isinstance(e, upto)) + 1]


def test_events_round_trip_through_the_file(tmp_path):
    journal = Journal(str(tmp_path / "journal.log"))
    journal.open()
    events = _commit_events("c1") + [ev.CommitAborted("c2", 12, "boom")]
    for e in events:
        journal.append(e, sync=isinstance(e, ev.CheckpointWritten))
    journal.close()
    result = Journal(str(tmp_path / "journal.log")).read()
    assert result.events == tuple(events)
    assert result.torn is None


def _journal_bytes() -> tuple[bytes, int]:
    events = _commit_events("c1", ev.IndexUploaded)
    data = MAGIC + b"".join(encode(e) for e in events)
    last = len(encode(events[-1]))
    return data, len(data) - last


def test_a_journal_cut_at_every_byte_of_its_last_record_reads_without_crashing(tmp_path):
    data, last_start = _journal_bytes()
    good = decode(data[:last_start]).events
    for cut in range(last_start, len(data)):
        result = decode(data[:cut])
        assert result.events == good
        if cut > last_start:
            assert result.torn is not None and result.torn.offset == last_start
        # open() truncates the tail and appending works afterwards
        path = tmp_path / f"j{cut}.log"
        path.write_bytes(data[:cut])
        journal = Journal(str(path))
        opened = journal.open()
        assert opened.events == good
        journal.append(ev.CommitAborted("c1", 99, "recovered"))
        journal.close()
        assert Journal(str(path)).read().events == good + (ev.CommitAborted("c1", 99, "recovered"),)


@pytest.mark.parametrize("where", ["length", "crc", "body"])
def test_a_flipped_byte_in_the_last_record_is_reported_and_ignored(where):
    data, last_start = _journal_bytes()
    offset = {"length": last_start + 1, "crc": last_start + 5, "body": len(data) - 3}[where]
    damaged = bytearray(data)
    damaged[offset] ^= 0x20
    result = decode(bytes(damaged))
    assert result.events == decode(data[:last_start]).events
    assert result.torn is not None and result.torn.offset == last_start


def test_a_file_that_is_not_a_journal_is_an_error_and_a_cut_header_is_a_torn_tail():
    with pytest.raises(CorruptJournalError):
        decode(b"something else entirely")
    assert decode(MAGIC[:3]).torn is not None
    assert decode(b"").events == ()


def test_compaction_keeps_only_open_commits(tmp_path):
    journal = Journal(str(tmp_path / "j.log"))
    journal.open()
    for e in _commit_events("done") + _commit_events("open", ev.BlobUploaded):
        journal.append(e)
    states = project(journal.read().events)
    journal.compact([e for s in states.values() if s.is_open for e in s.events])
    journal.append(ev.CommitAborted("open", 50, "x"))
    journal.close()
    remaining = Journal(str(tmp_path / "j.log")).read().events
    assert {e.commit_id for e in remaining} == {"open"}
    assert isinstance(remaining[-1], ev.CommitAborted)


def test_projection_folds_a_commit():
    state = project(_commit_events("c1", ev.IndexUploaded))["c1"]
    assert state.phase == CommitPhase.INDEX_UPLOADED
    assert state.expected_generation == 4 and state.batch_id == 9
    assert state.blob_ids == {"j/t/s/blobs/a", "j/t/s/blobs/b", "j/t/s/indexes/i.json"}
    done = project(_commit_events("c1"))["c1"]
    assert done.phase == CommitPhase.COMPLETED and not done.is_open and done.generation == 5


@pytest.mark.parametrize("upto,in_log,expected", [
    (ev.CommitStarted, False, AbortCommit),
    (ev.UploadsPlanned, False, AbortCommit),
    (ev.IndexUploaded, False, AbortCommit),
    (ev.IndexUploaded, True, FinishCommit),   # crash between the log append and the journal append
    (ev.CheckpointWritten, False, FinishCommit),
    (ev.TtlRemoved, True, FinishCommit),
    (ev.LocalCheckpointsPruned, True, FinishCommit),
    (ev.CommitCompleted, True, None),
])
def test_recovery_planner(upto, in_log, expected):
    states = project(_commit_events("c1", upto))
    actions = plan_recovery(states, ["c1"] if in_log else ["other"])
    if expected is None:
        assert actions == []
    else:
        assert len(actions) == 1 and isinstance(actions[0], expected)
        assert actions[0].state.commit_id == "c1"


def test_unknown_event_types_and_newer_versions_are_corrupt_journal_errors():
    with pytest.raises(CorruptJournalError):
        ev.event_from_dict({"type": "Nope", "commit_id": "c", "time_ms": 1})
    with pytest.raises(CorruptJournalError):
        ev.event_from_dict({"type": "CommitCompleted", "v": 99, "commit_id": "c", "time_ms": 1})


def test_upcasting_an_older_event_version(monkeypatch):
    monkeypatch.setattr(ev.CommitAborted, "version", 2)
    monkeypatch.setitem(ev.UPCASTERS, ("CommitAborted", 1), lambda d: {**d, "reason": d.pop("why", "")})
    event = ev.event_from_dict({"type": "CommitAborted", "v": 1, "commit_id": "c", "time_ms": 1, "why": "old"})
    assert event == ev.CommitAborted("c", 1, "old")
