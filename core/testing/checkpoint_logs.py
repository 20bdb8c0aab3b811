"""The ``CheckpointLog`` conformance suite: subclass ``CheckpointLogContract`` in a test module and implement its
abstract factory ``create_log()`` (the shape of every kit in ``blobstate.testing``, like eventsourcing's
``create_recorder()``) and the two hooks the failure tests need. ``self.tmp_path`` is the test's temporary
directory and ``self.request`` pytest's request (``self.request.getfixturevalue("my_server")``; name a
parametrized fixture in ``@pytest.mark.usefixtures`` on the class)::

    from blobstate.testing.checkpoint_logs import CheckpointLogContract, UNREACHABLE_SECRET

    class TestMyLog(CheckpointLogContract):
        def create_log(self):
            # a new instance (own connections) on the test's backing log: every call in a test reaches one log
            return MyLog(f"my://{self.tmp_path}/log")

        def write_raw_record(self, log, key, generation, payload):
            # store a raw record (bytes) the log cannot trust, as another client could
            log._raw_write(key, generation, payload)

        def create_unreachable_log(self):
            # a log whose backend cannot be reached; put UNREACHABLE_SECRET in its credentials
            return MyLog(f"my://user:{UNREACHABLE_SECRET}@127.0.0.1:1/log")

What it checks: generations start at 1 and grow by one in ``history`` order; ``append`` returns the record with its
generation and the record round-trips (every kind, each field as is: snapshot, delta and group records, their query
id, a group's manifest, a delta carrying the largest inline changelog); store keys are isolated; a stale or a future
expected generation is fenced and changes nothing; re-appending a record the log already holds at that generation
returns it (how an unknown outcome is resolved); of N writers racing on one generation exactly one wins, every
round, and the others get ``FencedError``; a zombie is fenced after pruning; ``prune`` keeps the newest K and is
idempotent; a malformed record raises ``CorruptIndexError`` from ``latest``/``history``/``append`` (never a silent
skip); an unreachable backend raises ``StorageError`` within ``UNREACHABLE_DEADLINE_S`` without leaking
credentials, and nothing committed is lost. Every test uses fresh store keys, so one backing log may serve the whole
suite. Set ``supports_keys = False`` on the subclass for a log whose ``keys()`` returns [] by design. """

from __future__ import annotations

import os
import threading
import time
import uuid
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from blobstate.errors import CorruptIndexError, FencedError, StorageError
from blobstate.model.records import GROUP, MAX_INLINE_CHANGELOG_BYTES, Checkpoint, PartitionEntry, StoreKey
from blobstate.plugin.interfaces import CheckpointLog
from blobstate.testing.kit import ContractKit

#: The password an ``open_unreachable_log`` fixture should use; it must never appear in an error.
UNREACHABLE_SECRET = "s3cr3t-pw-never-printed"
UNREACHABLE_DEADLINE_S = 60.0  # seconds an unreachable backend may take to fail each call
RACE_WRITERS, RACE_ROUNDS = 4, 3  # writers per round and rounds in the race test


def new_key(label: str = "store") -> StoreKey:
    """A store key no other test uses."""
    return StoreKey(f"job-{uuid.uuid4().hex[:12]}", "task-0", label)


def make_checkpoint(key: StoreKey, *, batch_id: int | None = None, writer: str = "w") -> Checkpoint:
    """A checkpoint record for ``key`` with unique ids (generation 0: the log assigns it)."""
    cid = uuid.uuid4().hex
    return Checkpoint(store_key=key, checkpoint_id=cid, generation=0, index_blob_id=f"{key.prefix}/indexes/{cid}.json",
                      index_crc32c=int(cid[:8], 16), index_size=1234, created_time_ms=int(time.time() * 1000),
                      batch_id=batch_id, writer_id=writer)


def make_delta(key: StoreKey, *, batch_id: int, query_id: str = "query-1", writer: str = "w",
               inline: bytes | None = None) -> Checkpoint:
    """A delta record for ``key`` (a changelog blob, or the changelog ``inline``; generation 0: the log assigns it)."""
    cid = uuid.uuid4().hex
    return Checkpoint(store_key=key, checkpoint_id=cid, generation=0, index_blob_id="", index_crc32c=0,
                      index_size=0, created_time_ms=int(time.time() * 1000), batch_id=batch_id, writer_id=writer,
                      kind="delta", changelog_blob_id="" if inline is not None else f"{key.prefix}/blobs/{cid}",
                      changelog_crc32c=int(cid[:8], 16), changelog_size=321 if inline is None else len(inline),
                      query_id=query_id, changelog_inline=inline)


def make_group(key: StoreKey, *, batch_id: int, partitions: int = 4, base: int = 0,
               query_id: str = "query-1", writer: str = "w") -> Checkpoint:
    """A group record for ``key``: a delta of every partition (the last one a snapshot instead), generation 0."""
    entries = []
    for p in range(partitions):
        cid = uuid.uuid4().hex
        snapshot = p == partitions - 1
        blob = f"{key.prefix}/indexes/{cid}.json" if snapshot else f"{key.prefix}/blobs/{cid}"
        entries.append(PartitionEntry(p, "snapshot" if snapshot else "delta", cid, batch_id, blob, int(cid[:8], 16),
                                      100 + p, attempt=p % 2, base=base))
    return Checkpoint(store_key=key, checkpoint_id=uuid.uuid4().hex, generation=0, index_blob_id="", index_crc32c=0,
                      index_size=0, created_time_ms=int(time.time() * 1000), batch_id=batch_id, writer_id=writer,
                      kind=GROUP, query_id=query_id, num_partitions=partitions, partitions=tuple(entries))


def same_record(a: Checkpoint, b: Checkpoint) -> bool:
    return a.to_json() == b.to_json()


class CheckpointLogContract(ContractKit):
    """The contract of ``blobstate.plugin.interfaces.CheckpointLog``; subclass it (the class name must start with Test)
    and implement ``create_log``, ``write_raw_record`` and ``create_unreachable_log`` (see the module docstring).
    """

    supports_keys: bool = True

    @abstractmethod
    def create_log(self) -> CheckpointLog:
        """A new ``CheckpointLog`` instance (its own connections) on this test's backing log; every call within one
        test must reach the same log (the suite closes what it opens)."""

    @abstractmethod
    def write_raw_record(self, log: CheckpointLog, key: StoreKey, generation: int, payload: bytes) -> None:
        """Store ``payload`` as the record of ``key`` at ``generation``, bypassing every check (another client)."""

    @abstractmethod
    def create_unreachable_log(self) -> CheckpointLog:
        """A log whose backend cannot be reached, with ``UNREACHABLE_SECRET`` in its credentials."""

    @pytest.fixture
    def open_log(self, _kit: None) -> Callable[[], CheckpointLog]:
        return self.create_log

    @pytest.fixture
    def write_malformed(self, _kit: None) -> Callable[..., None]:
        return self.write_raw_record

    @pytest.fixture
    def open_unreachable_log(self, _kit: None) -> Callable[[], CheckpointLog]:
        return self.create_unreachable_log

    @pytest.fixture
    def log(self, open_log: Callable[[], CheckpointLog]) -> Any:
        log = open_log()
        yield log
        log.close()

    def _append_n(self, log: CheckpointLog, key: StoreKey, n: int) -> list[Checkpoint]:
        out = []
        for i in range(n):
            out.append(log.append(make_checkpoint(key, batch_id=i), i))
        return out

    # -- ordering ----------------------------------------------------------------------------------------------
    def test_empty_log(self, log: CheckpointLog) -> None:
        key = new_key()
        assert log.latest(key) is None
        assert log.history(key) == []

    def test_generations_start_at_one_and_grow_by_one(self, log: CheckpointLog) -> None:
        key = new_key()
        written = []
        for expected in range(5):
            cp = make_checkpoint(key, batch_id=expected * 10)
            record = log.append(cp, expected)
            assert record.generation == expected + 1
            assert record.checkpoint_id == cp.checkpoint_id
            written.append(record)
            assert same_record(log.latest(key), record)
        history = log.history(key)
        assert [c.generation for c in history] == [1, 2, 3, 4, 5]
        assert all(same_record(a, b) for a, b in zip(history, written, strict=True))

    def test_records_survive_a_new_instance(self, log: CheckpointLog,
                                            open_log: Callable[[], CheckpointLog]) -> None:
        key = new_key()
        written = self._append_n(log, key, 3)
        other = open_log()
        try:
            assert [c.to_json() for c in other.history(key)] == [c.to_json() for c in written]
            assert other.append(make_checkpoint(key), 3).generation == 4
        finally:
            other.close()
        assert log.latest(key).generation == 4

    def test_delta_and_snapshot_records_share_one_sequence(self, log: CheckpointLog,
                                                           open_log: Callable[[], CheckpointLog]) -> None:
        key, largest = new_key(), os.urandom(MAX_INLINE_CHANGELOG_BYTES)  # a 44 KiB record, compared whole below
        written = [log.append(make_delta(key, batch_id=0), 0), log.append(make_checkpoint(key, batch_id=0), 1),
                   log.append(make_delta(key, batch_id=1, inline=largest), 2)]
        other = open_log()
        try:
            history = other.history(key)
            assert [c.to_json() for c in history] == [c.to_json() for c in written]
            assert [(c.kind, c.generation) for c in history] == [("delta", 1), ("snapshot", 2), ("delta", 3)]
            assert history[0].changelog_blob_id == written[0].changelog_blob_id and history[2].query_id == "query-1"
            assert same_record(other.latest(key), written[2])
            delta = make_delta(key, batch_id=1)  # a re-run of batch 1, then its unknown outcome resolved
            again = other.append(delta, 3)
            assert same_record(other.append(delta, 3), again) and again.generation == 4
        finally:
            other.close()

    def test_group_records_round_trip_and_share_the_sequence(self, log: CheckpointLog,
                                                            open_log: Callable[[], CheckpointLog]) -> None:
        key = new_key()
        written = [log.append(make_group(key, batch_id=0), 0), log.append(make_delta(key, batch_id=1), 1),
                   log.append(make_group(key, batch_id=1, base=2), 2)]
        other = open_log()
        try:
            history = other.history(key)
            assert [c.to_json() for c in history] == [c.to_json() for c in written]
            assert [(c.kind, c.generation) for c in history] == [("group", 1), ("delta", 2), ("group", 3)]
            assert history[2].partitions == written[2].partitions and history[2].num_partitions == 4
            assert [p.generation for p in history[0].expand()] == [1, 1, 1, 1]
            group = make_group(key, batch_id=2, base=3)  # an unknown outcome, resolved by re-appending
            again = other.append(group, 3)
            assert same_record(other.append(group, 3), again) and again.generation == 4
            with pytest.raises(FencedError):  # a second driver that started from generation 3
                other.append(make_group(key, batch_id=2, base=3, writer="zombie"), 3)
        finally:
            other.close()
        assert same_record(log.latest(key), again)

    def test_store_keys_are_isolated(self, log: CheckpointLog) -> None:
        a, b = new_key("a"), new_key("b")
        log.append(make_checkpoint(a), 0)
        log.append(make_checkpoint(b), 0)
        log.append(make_checkpoint(a), 1)
        assert [c.generation for c in log.history(a)] == [1, 2]
        assert [c.generation for c in log.history(b)] == [1]
        assert all(c.store_key == a for c in log.history(a))
        with pytest.raises(FencedError):
            log.append(make_checkpoint(b), 2)

    def test_keys_lists_stores_with_checkpoints(self, log: CheckpointLog) -> None:
        if not self.supports_keys:
            pytest.skip("this log does not list keys")
        a, b = new_key("a"), new_key("b")
        log.append(make_checkpoint(a), 0)
        log.append(make_checkpoint(b), 0)
        found = set(log.keys())
        assert {a, b} <= found
        assert new_key("never-written") not in found

    # -- fencing -----------------------------------------------------------------------------------------------
    def test_stale_and_future_expected_generations_are_fenced(self, log: CheckpointLog) -> None:
        key = new_key()
        before = self._append_n(log, key, 2)
        for expected in (0, 1, 3, 7):
            with pytest.raises(FencedError):
                log.append(make_checkpoint(key), expected)
        assert [c.to_json() for c in log.history(key)] == [c.to_json() for c in before]
        assert log.append(make_checkpoint(key), 2).generation == 3

    def test_reappend_of_an_applied_record_returns_it(self, log: CheckpointLog,
                                                     open_log: Callable[[], CheckpointLog]) -> None:
        """An unknown append outcome is resolved by re-appending: the log must answer "yours" for certain."""
        key = new_key()
        mine = make_checkpoint(key, writer="me")
        first = log.append(mine, 0)
        other = open_log()
        try:
            again = other.append(mine, 0)  # a retry from a client that never heard the first answer
            assert same_record(again, first) and again.generation == 1
            with pytest.raises(FencedError):
                other.append(make_checkpoint(key, writer="rival"), 0)
            later = other.append(make_checkpoint(key, writer="next"), 1)
            assert same_record(other.append(mine, 0), first)  # still certain once superseded
        finally:
            other.close()
        assert [c.generation for c in log.history(key)] == [1, 2]
        assert same_record(log.latest(key), later)

    def test_zombie_writer_is_fenced_by_a_second_instance(self, log: CheckpointLog,
                                                           open_log: Callable[[], CheckpointLog]) -> None:
        key = new_key()
        log.append(make_checkpoint(key, writer="old"), 0)
        new_writer = open_log()
        try:
            winner = new_writer.append(make_checkpoint(key, writer="new"), 1)
        finally:
            new_writer.close()
        with pytest.raises(FencedError):
            log.append(make_checkpoint(key, writer="old"), 1)
        assert same_record(log.latest(key), winner)

    def test_racing_writers_one_winner_per_generation(self, open_log: Callable[[], CheckpointLog]) -> None:
        key = new_key()
        logs = [open_log() for _ in range(RACE_WRITERS)]
        try:
            for expected in range(RACE_ROUNDS):
                barrier = threading.Barrier(len(logs))
                outcomes: list[Any] = [None] * len(logs)

                def run(i: int, log: CheckpointLog, expected: int = expected, barrier: threading.Barrier = barrier,
                        outcomes: list[Any] = outcomes) -> None:
                    cp = make_checkpoint(key, writer=f"w{i}")
                    barrier.wait(timeout=30)
                    try:
                        outcomes[i] = log.append(cp, expected)
                    except Exception as exc:  # noqa: BLE001 - recorded and asserted below
                        outcomes[i] = exc

                threads = [threading.Thread(target=run, args=(i, lg)) for i, lg in enumerate(logs)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(timeout=120)
                winners = [o for o in outcomes if isinstance(o, Checkpoint)]
                losers = [o for o in outcomes if not isinstance(o, Checkpoint)]
                assert len(winners) == 1, outcomes
                assert all(isinstance(o, FencedError) for o in losers), outcomes
                assert winners[0].generation == expected + 1
                for lg in logs:
                    assert same_record(lg.latest(key), winners[0])
            history = logs[0].history(key)
            assert [c.generation for c in history] == list(range(1, RACE_ROUNDS + 1))
        finally:
            for lg in logs:
                lg.close()

    # -- retention ---------------------------------------------------------------------------------------------
    def test_prune_keeps_the_newest_and_is_idempotent(self, log: CheckpointLog) -> None:
        key = new_key()
        written = self._append_n(log, key, 6)
        removed = log.prune(key, 3)
        assert sorted(c.generation for c in removed) == [1, 2, 3]
        assert [c.generation for c in log.history(key)] == [4, 5, 6]
        assert same_record(log.latest(key), written[-1])
        assert log.prune(key, 3) == []
        assert log.append(make_checkpoint(key), 6).generation == 7
        removed = log.prune(key, 1)
        assert sorted(c.generation for c in removed) == [4, 5, 6]
        assert [c.generation for c in log.history(key)] == [7]

    def test_prune_below_a_generation_never_deletes_a_newer_record(self, log: CheckpointLog) -> None:
        """``prune(key, keep, below=g)`` deletes only records below generation ``g``: a record appended after the
        caller read the log (by another writer) is never deleted in place of an old one (retention by generation,
        issue 27)."""
        key = new_key()
        self._append_n(log, key, 6)
        removed = log.prune(key, 1, below=3)
        assert sorted(c.generation for c in removed) == [1, 2]
        assert [c.generation for c in log.history(key)] == [3, 4, 5, 6]
        assert log.prune(key, 1, below=3) == []
        removed = log.prune(key, 2, below=99)
        assert sorted(c.generation for c in removed) == [3, 4]
        assert [c.generation for c in log.history(key)] == [5, 6]

    def test_forget_deletes_exactly_the_records_named_never_the_newest(self, log: CheckpointLog) -> None:
        """Optional ``forget`` (else ``NotImplementedError``): only the records named, by generation and id."""
        if not log.can_forget:
            pytest.skip(f"{type(log).__name__} keeps records inside the log (forget is optional)")
        written = self._append_n(log, key := new_key(), 5)
        assert sorted(c.generation for c in log.forget(key, [written[1], written[3]])) == [2, 4]
        assert log.forget(key, [written[1], replace(written[2], checkpoint_id="other")]) == []  # idempotent, by id
        assert [c.generation for c in log.history(key)] == [1, 3, 5]
        with pytest.raises(ValueError):
            log.forget(key, [written[4]])
        assert log.append(make_checkpoint(key), 5).generation == 6  # the generation goes on past the gaps

    def test_zombie_cannot_fill_a_pruned_generation(self, log: CheckpointLog) -> None:
        key = new_key()
        self._append_n(log, key, 4)
        log.prune(key, 1)
        for expected in (0, 1, 2):
            with pytest.raises(FencedError):
                log.append(make_checkpoint(key, writer="zombie"), expected)
        assert [c.generation for c in log.history(key)] == [4]
        assert log.latest(key).writer_id == "w"

    def test_prune_survives_a_new_instance(self, log: CheckpointLog, open_log: Callable[[], CheckpointLog]) -> None:
        key = new_key()
        self._append_n(log, key, 4)
        log.prune(key, 2)
        other = open_log()
        try:
            assert [c.generation for c in other.history(key)] == [3, 4]
            assert other.latest(key).generation == 4
        finally:
            other.close()

    # -- malformed records -------------------------------------------------------------------------------------
    @pytest.mark.parametrize("payload", [b"{not json", b'{"schemaVersion": 1}', b"\xff\xfe binary"],
                             ids=["broken-json", "missing-fields", "not-utf8"])
    def test_malformed_record_is_a_clear_error(self, log: CheckpointLog, write_malformed: Callable[..., None],
                                               payload: bytes) -> None:
        key = new_key()
        self._append_n(log, key, 1)
        write_malformed(log, key, 2, payload)
        with pytest.raises(CorruptIndexError):
            log.latest(key)
        with pytest.raises(CorruptIndexError):
            log.history(key)
        with pytest.raises((CorruptIndexError, FencedError)):
            log.append(make_checkpoint(key), 1)

    def test_record_for_another_generation_is_malformed(self, log: CheckpointLog,
                                                       write_malformed: Callable[..., None]) -> None:
        key = new_key()
        self._append_n(log, key, 1)
        lying = make_checkpoint(key).with_generation(7)  # says 7, stored as 2
        write_malformed(log, key, 2, lying.to_bytes())
        with pytest.raises(CorruptIndexError):
            log.history(key)

    # -- unreachable -------------------------------------------------------------------------------------------
    def test_unreachable_log_is_a_clear_error_and_loses_nothing(
            self, log: CheckpointLog, open_unreachable_log: Callable[[], CheckpointLog]) -> None:
        key = new_key()
        written = self._append_n(log, key, 2)
        dead = open_unreachable_log()
        try:
            calls: list[Callable[[], object]] = [
                lambda: dead.latest(key), lambda: dead.history(key),
                lambda: dead.append(make_checkpoint(key), 2), lambda: dead.prune(key, 1)]
            for call in calls:
                started = time.monotonic()
                with pytest.raises(StorageError) as info:
                    call()
                assert time.monotonic() - started < UNREACHABLE_DEADLINE_S
                assert not isinstance(info.value, FencedError)
                assert UNREACHABLE_SECRET not in str(info.value)
                assert UNREACHABLE_SECRET not in repr(info.value.args)
            assert UNREACHABLE_SECRET not in str(getattr(dead, "url", ""))
        finally:
            dead.close()
        assert [c.to_json() for c in log.history(key)] == [c.to_json() for c in written]
        assert log.append(make_checkpoint(key), 2).generation == 3
