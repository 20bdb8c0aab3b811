"""``blobstate.journal.file`` beyond ``test_journal.py`` (round trip, a cut at every byte, a flipped byte in the last
record, compaction): the record framing, damage in the middle told from a torn tail (and the scan's budget), a
record that frames but is not JSON, ``open`` cutting the tail off the real file, and a write that fails or comes up
short (a real file size limit, ``RLIMIT_FSIZE``) cut back off the file, after which the journal refuses appends."""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import struct

import pytest

import blobstate.journal.events as ev
from blobstate.errors import CorruptJournalError, JournalWriteError
from blobstate.journal.file import BODY_START, HEADER, MAGIC, MAX_RECORD, Journal, TornTail, decode, encode
from blobstate.local.checksum import crc32c_bytes

EVENTS = [ev.CommitStarted("c1", 1, "j/t/s", 0), ev.BlobUploaded("c1", 2, "j/t/s/blobs/a", 10),
          ev.CheckpointWritten("c1", 3, 1), ev.CommitCompleted("c1", 4)]


def journal_bytes(events=EVENTS) -> bytes:
    return MAGIC + b"".join(encode(e) for e in events)


def offsets(events=EVENTS) -> list[int]:
    """Where each record starts."""
    out, pos = [], len(MAGIC)
    for e in events:
        out.append(pos)
        pos += len(encode(e))
    return out


def test_a_record_is_its_length_its_crc32c_and_its_json():
    record = encode(EVENTS[1])
    length, crc = HEADER.unpack_from(record)
    body = record[HEADER.size:]
    assert length == len(body) and crc == crc32c_bytes(body) and body.startswith(BODY_START)
    assert json.loads(body) == ev.event_to_dict(EVENTS[1])


def test_damage_followed_by_good_records_is_not_a_torn_tail():
    data = bytearray(journal_bytes())
    second = offsets()[1]
    data[second + HEADER.size + 3] ^= 0x01  # a flipped byte in the second of four records
    with pytest.raises(CorruptJournalError, match=rf"journal record at byte {second} is damaged \(record checksum "
                                                  r"mismatch\) and valid records follow it"):
        decode(bytes(data))
    lenient = decode(bytes(data), strict=False)  # ``journal show``: the good start and where the damage begins
    assert lenient.events == tuple(EVENTS[:1]) and lenient.torn == TornTail(second, len(data) - second,
                                                                           "record checksum mismatch")


def test_a_record_length_beyond_any_record_is_a_bad_header():
    data = journal_bytes(EVENTS[:1]) + struct.pack(">II", MAX_RECORD + 1, 0) + b"x" * 20
    result = decode(data)
    assert result.torn.reason == f"bad record length {MAX_RECORD + 1}" and result.events == tuple(EVENTS[:1])


def test_a_record_that_frames_but_is_not_json_at_the_end_is_a_torn_tail():
    body = b'{"type": not json}'
    data = journal_bytes(EVENTS[:2]) + HEADER.pack(len(body), crc32c_bytes(body)) + body
    result = decode(data)
    assert result.events == tuple(EVENTS[:2]) and result.torn.reason == "record is not JSON"
    assert result.good_length == len(journal_bytes(EVENTS[:2]))


def test_a_record_that_frames_and_holds_an_unknown_event_is_an_error():
    body = json.dumps({"type": "FromTheFuture", "v": 1, "commit_id": "c", "time_ms": 1}).encode()
    with pytest.raises(CorruptJournalError, match="unreadable journal event"):
        decode(MAGIC + HEADER.pack(len(body), crc32c_bytes(body)) + body)


def test_the_scan_for_good_records_after_damage_answers_conservatively_past_its_budget():
    # damage, then candidates (a record body's start) each declaring a length that fits the file but holding no
    # valid record: checksumming them all would grow quadratically, so past 4x the file's size the scan stops and
    # says "good records may follow" (never truncate what might be good)
    n, piece = 200, HEADER.size + len(BODY_START) + 22
    candidates = [struct.pack(">II", piece * (n - i) - HEADER.size, 0) + BODY_START + b"." * 22 for i in range(n)]
    data = MAGIC + HEADER.pack(5, 0) + b"xxxxx" + b"".join(candidates)
    assert sum(piece * (n - i) for i in range(n)) > 4 * len(data)
    with pytest.raises(CorruptJournalError, match="valid records follow it"):
        decode(data)
    assert decode(MAGIC + HEADER.pack(5, 0) + b"xxxxx" + b"".join(candidates[-3:])).torn is not None  # within it


def test_only_a_real_record_after_damage_makes_it_mid_file_corruption():
    data = bytearray(journal_bytes(EVENTS[:1]))
    data += HEADER.pack(40, 0) + BODY_START + b"x" * 32  # damaged, and nothing valid after it
    result = decode(bytes(data))
    assert result.torn is not None and result.events == tuple(EVENTS[:1])


def test_open_cuts_a_torn_tail_off_the_file_and_says_so(tmp_path, caplog):
    path = tmp_path / "sub" / "journal"
    path.parent.mkdir()
    path.write_bytes(journal_bytes() + encode(ev.CommitAborted("c2", 5, "x"))[:-4])
    journal = Journal(str(path))
    with caplog.at_level(logging.WARNING, logger="blobstate.journal.file"):
        result = journal.open()
    assert result.events == tuple(EVENTS) and journal.last_torn == result.torn
    assert os.path.getsize(path) == len(journal_bytes())
    assert "ignoring a torn tail of" in caplog.text and "cut inside a record" in caplog.text
    journal.append(ev.CommitAborted("c2", 6, "again"), sync=True)
    journal.close()
    assert Journal(str(path)).read().events == (*EVENTS, ev.CommitAborted("c2", 6, "again"))


def test_open_makes_a_new_journal_and_a_cut_header_one_again(tmp_path):
    fresh = Journal(str(tmp_path / "new" / "journal"))
    assert fresh.open().events == () and (tmp_path / "new" / "journal").read_bytes() == MAGIC
    fresh.close()
    cut = tmp_path / "cut"
    cut.write_bytes(MAGIC[:5])
    journal = Journal(str(cut))
    assert journal.open().torn.reason == "cut inside the file header" and cut.read_bytes() == MAGIC
    journal.close()


def test_reading_a_journal_that_does_not_exist_is_empty_and_creates_nothing(tmp_path):
    assert Journal(str(tmp_path / "none")).read().events == () and not (tmp_path / "none").exists()


def test_an_append_before_open_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="journal is not open"):
        Journal(str(tmp_path / "j")).append(EVENTS[0])


@pytest.fixture
def file_size_limit():
    """Set ``RLIMIT_FSIZE`` (bytes) for the block: writes past it come up short, then fail (``EFBIG``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def limit(size: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))

    yield limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, previous)


def test_a_short_write_is_cut_back_off_and_the_journal_refuses_every_later_append(tmp_path, file_size_limit):
    path = tmp_path / "journal"
    journal = Journal(str(path))
    journal.open()
    journal.append(EVENTS[0])
    whole = path.read_bytes()
    file_size_limit(len(whole) + 10)  # the disk fills up in the middle of the next record
    with pytest.raises(JournalWriteError, match=r"cannot write the journal .*short write"):
        journal.append(EVENTS[1])
    assert path.read_bytes() == whole  # no torn record left between whole ones
    with pytest.raises(JournalWriteError, match="accepts no more records after a failed write"):
        journal.append(EVENTS[2])
    file_size_limit(resource.RLIM_INFINITY)
    with pytest.raises(JournalWriteError, match="accepts no more records"):
        journal.append(EVENTS[2])  # still refused: a reopen reads the file again first
    journal.close()
    reopened = Journal(str(path))
    assert reopened.open().events == (EVENTS[0],)
    reopened.append(EVENTS[1])
    reopened.close()
    assert Journal(str(path)).read().events == tuple(EVENTS[:2])


def test_a_write_that_fails_outright_is_a_journal_write_error(tmp_path, file_size_limit):
    path = tmp_path / "journal"
    journal = Journal(str(path))
    journal.open()
    file_size_limit(len(MAGIC))  # full before the first byte of the record
    with pytest.raises(JournalWriteError, match="File too large"):
        journal.append(EVENTS[0])
    assert path.read_bytes() == MAGIC
    journal.close()


def test_compaction_keeps_the_given_events_and_appends_continue_after_them(tmp_path):
    path = tmp_path / "journal"
    journal = Journal(str(path))
    journal.open()
    for e in EVENTS:
        journal.append(e)
    journal.compact([EVENTS[0]])
    assert not (tmp_path / "journal.compact").exists()
    journal.append(EVENTS[3])
    journal.sync()
    journal.close()
    journal.sync()  # closed: nothing to do
    assert Journal(str(path)).read().events == (EVENTS[0], EVENTS[3])
