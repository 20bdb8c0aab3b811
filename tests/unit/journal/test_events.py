"""``blobstate.journal.events`` beyond ``test_journal_schema.py`` (every event round-trips, integers are bounded,
declaring registers): the wire form, defaults and ignored unknown fields, the version as a strict integer, upcasting
over several versions, a missing upcaster, and an unreadable record shown without control characters."""

from __future__ import annotations

import json

import msgspec
import pytest

import blobstate.journal.events as ev
from blobstate.errors import CorruptJournalError


def test_the_wire_form_is_type_and_version_first_with_lists_for_tuples():
    event = ev.UploadsPlanned("c1", 5, ("a", "b"), "i.json", 30)
    doc = ev.event_to_dict(event)
    assert doc == {"type": "UploadsPlanned", "v": 1, "commit_id": "c1", "time_ms": 5, "blob_ids": ["a", "b"],
                   "index_blob_id": "i.json", "bytes_planned": 30}
    assert json.loads(json.dumps(doc)) == doc


def test_an_older_record_without_the_later_fields_gets_their_defaults_and_unknown_fields_are_ignored():
    event = ev.event_from_dict({"type": "CommitStarted", "v": 1, "commit_id": "c", "time_ms": 1,
                                "store_key": "j/t/s", "expected_generation": 3, "from_the_future": [1, 2]})
    assert event == ev.CommitStarted("c", 1, "j/t/s", 3, None, 3, "", "", "snapshot", 0)
    assert ev.event_from_dict({"type": "CommitCompleted", "commit_id": "c", "time_ms": 2}) == \
        ev.CommitCompleted("c", 2)  # no "v": version 1


def test_events_are_frozen():
    event = ev.CheckpointWritten("c", 1, 7)
    with pytest.raises(AttributeError):
        event.generation = 8


@pytest.mark.parametrize("version", [True, "1", 1.0, None, [1]])
def test_the_version_is_a_plain_integer(version):
    with pytest.raises(CorruptJournalError, match="unreadable journal event"):
        ev.event_from_dict({"type": "CommitCompleted", "v": version, "commit_id": "c", "time_ms": 1})


def test_a_newer_version_names_both_versions():
    with pytest.raises(CorruptJournalError, match=r"CommitCompleted v3 is newer than this blobstate understands "
                                                  r"\(v1\)"):
        ev.event_from_dict({"type": "CommitCompleted", "v": 3, "commit_id": "c", "time_ms": 1})


def test_upcasting_runs_every_step_from_the_records_version(monkeypatch):
    monkeypatch.setattr(ev.CommitAborted, "version", 3)
    monkeypatch.setitem(ev.UPCASTERS, ("CommitAborted", 1), lambda d: {**d, "why": d.pop("cause")})
    monkeypatch.setitem(ev.UPCASTERS, ("CommitAborted", 2), lambda d: {**d, "reason": d.pop("why").upper()})
    v1 = {"type": "CommitAborted", "v": 1, "commit_id": "c", "time_ms": 1, "cause": "crash"}
    assert ev.event_from_dict(v1) == ev.CommitAborted("c", 1, "CRASH")
    v2 = {"type": "CommitAborted", "v": 2, "commit_id": "c", "time_ms": 1, "why": "late"}
    assert ev.event_from_dict(v2) == ev.CommitAborted("c", 1, "LATE")
    assert v1["cause"] == "crash"  # the record read is not changed
    assert ev.event_to_dict(ev.CommitAborted("c", 1, "x"))["v"] == 3


def test_an_old_version_without_its_upcaster_is_unreadable(monkeypatch):
    monkeypatch.setattr(ev.CommitCompleted, "version", 2)
    with pytest.raises(CorruptJournalError, match="unreadable journal event"):
        ev.event_from_dict({"type": "CommitCompleted", "v": 1, "commit_id": "c", "time_ms": 1})


@pytest.mark.parametrize("doc", [{"v": 1, "commit_id": "c"}, {"type": None}, {"type": ["x"]}, "text", 5, None],
                         ids=["no type", "null type", "list type", "a string", "a number", "null"])
def test_a_record_that_is_no_event_is_unreadable(doc):
    with pytest.raises(CorruptJournalError, match="unreadable journal event"):
        ev.event_from_dict(doc)


def test_an_unreadable_record_is_shown_short_and_without_control_characters():
    doc = {"type": "Nope\x1b[31m\u202e", "junk": "x" * 1000}
    with pytest.raises(CorruptJournalError) as info:
        ev.event_from_dict(doc)
    message = str(info.value)
    assert message.isprintable() and "Nope" in message  # escaped, never sent to a terminal as they are
    assert len(message) < 500


def test_a_type_name_other_than_the_class_name_is_refused_at_declaration():
    before = dict(ev.EVENT_TYPES)
    with pytest.raises(TypeError, match="Renamed.type_name must be its class name"):
        class Renamed(ev.Event):
            type_name = "Other"
    assert ev.EVENT_TYPES == before


def test_the_tag_is_checked_by_the_schema():
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"type": "CommitCompleted", "commit_id": "c", "time_ms": 1}, ev.CommitAborted)
