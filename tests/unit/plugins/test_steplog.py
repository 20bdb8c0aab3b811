"""``blobstate.plugins.steplog``: each journal event is logged at INFO on ``blobstate.steps`` with its type and its
fields, lists as counts, and a record being appended as its size only: never its content (it may carry a batch's
keys and values)."""

from __future__ import annotations

import logging

from blobstate.journal import events as ev
from blobstate.plugins import steplog

PAYLOAD = '{"changes": [["user-42", "secret balance 1000"]]}'


def test_a_record_being_appended_is_logged_as_its_size_never_its_content(caplog):
    event = ev.CheckpointAppending(commit_id="c1", time_ms=5, expected_generation=3, record=PAYLOAD)
    with caplog.at_level(logging.INFO, logger="blobstate.steps"):
        steplog.blobstate_journal_event(event=event, store_key="job/0/counts")
    [record] = caplog.records
    assert record.name == "blobstate.steps" and record.levelno == logging.INFO
    line = record.getMessage()
    assert line.startswith("job/0/counts commit c1: ")
    assert f"record=<{len(PAYLOAD)} chars>" in line and "expected_generation=3" in line
    assert "user-42" not in line and "secret balance" not in line


def test_lists_are_logged_as_counts_and_the_commit_fields_once(caplog):
    event = ev.BlobsDeleted(commit_id="c2", time_ms=9, blob_ids=("a", "b", "c"), checkpoints_pruned=("x",))
    with caplog.at_level(logging.INFO, logger="blobstate.steps"):
        steplog.blobstate_journal_event(event=event, store_key="job/0/counts")
    line = caplog.records[0].getMessage()
    assert "blob_ids=3" in line and "checkpoints_pruned=1" in line
    assert event.type_name in line and "time_ms" not in line and "commit_id=" not in line


def test_nothing_is_logged_below_info(caplog):
    event = ev.CheckpointWritten(commit_id="c3", time_ms=1, generation=4)
    with caplog.at_level(logging.WARNING, logger="blobstate.steps"):
        steplog.blobstate_journal_event(event=event, store_key="job/0/counts")
    assert caplog.records == []
