"""Stateful processors as actors (issue 41, profile ``processor``): a processor with a TTL (dedup) and one with
event-time timers (sessions) from ``tests/processors/``, each run batch after batch through
``blobstate.spark.processor.run_batch`` on a partition store committed through the real commit engine, killed,
paused past its TTL and restarted like every other writer.

- ``processor``: the query's driver and its one partition. It opens the store as ``actors.writer`` does (pinned
  generation, a committer over its work directory), restores the latest committed state (a snapshot directory, one
  file per key, then the deltas' changelogs replayed) into an in-memory key-value store, and runs the next
  ``batches`` batches: each batch's input, processing time and watermark are a pure function of the store and the
  batch id (Spark's offset log fixes them, so a re-run sees the same), its writes (``StagedWrites``) committed as
  one delta (``DeltaCommitter.commit_changelog``), a snapshot every ``snapshot_every`` batches; then applied to the
  in-memory store.

Invariants, checked when a restarted processor restores and at the end (``final``) on the latest committed state:
the state equals the reference fold of the processor over the committed batches 0..b with the same times
(``tests/processors/reference.py``: dedup's ids with their expiry, every value past its TTL removed by the batch
that reached it; sessions' open sessions, each with exactly its one timer at ``last event + gap``); and every
batch's output a processor committed equals the reference's output of that batch (a timer fires exactly once, in
the batch whose watermark reaches it, and never again after a restart).
"""

from __future__ import annotations

import importlib
import os
import random
import shutil
import zlib
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from blobstate.commit.delta import DeltaCommitter
from blobstate.errors import BlobstateError, NothingToRestore
from blobstate.model import changelog
from blobstate.model.changelog import PUT, StagedWrites
from blobstate.model.records import StoreKey
from blobstate.plugins.dir_store import DirStore
from blobstate.restoring import chain as replay
from blobstate.restoring.snapshot import restore_snapshot
from blobstate.testing.simulation.actors import pinned_committer
from blobstate.testing.simulation.invariants import Violation
from blobstate.testing.simulation.runner import ActorSpec
from blobstate.testing.simulation.scheduler import Fault

if TYPE_CHECKING:
    from blobstate.repository.repo import Repository
    from blobstate.testing.simulation.runner import Simulation
    from blobstate.testing.simulation.scheduler import Actor

DEDUP = StoreKey("sim", "0", "proc-dedup")
SESSIONS = StoreKey("sim", "0", "proc-sessions")
STEP_MS = 2_500  # processing time between batches: dedup's TTL (10 s) ends exactly at a later batch
EVENT_STEP_MS = 20_000  # event time between batches of the sessions: a session closes a few batches after its last
BASE_MS = 1_700_000_000_000


class MemoryDB:
    """One partition's RocksDB inside the simulator: bytes keys and values, ``get``, ``items(from_key=)`` in key
    order (what ``Store`` and ``StagedWrites`` read)."""

    def __init__(self, values: dict[bytes, bytes] | None = None) -> None:
        self.values = dict(values or {})

    def get(self, key: Any, default: Any = None) -> Any:
        return self.values.get(key, default)

    def items(self, from_key: bytes | None = None) -> Any:
        for key in sorted(self.values):
            if from_key is None or key >= from_key:
                yield key, self.values[key]

    def apply(self, ops: list) -> None:
        for op, key, value in ops:
            if op == PUT:
                self.values[key] = value
            else:
                self.values.pop(key, None)


# -- the two processors, their batches and their reference ----------------------------------------------------------
def _tests(name: str) -> Any:
    """``tests.processors.<name>`` (the processors and their reference live with the tests; imported when a
    processor actor runs, from the repository's root as ``bench.simulate`` and the tests run)."""
    return importlib.import_module(f"tests.processors.{name}")


def _kind(key: StoreKey) -> str:
    return "dedup" if key == DEDUP else "sessions"


def spec_of(key: StoreKey) -> Any:
    from blobstate.spark.processor import ProcessorSpec

    if _kind(key) == "dedup":
        return ProcessorSpec(("id",), _tests("dedup").OUTPUT, time_mode="ProcessingTime", query_id=key.store)
    return ProcessorSpec(("user",), _tests("sessions").OUTPUT, time_mode="EventTime", event_time_column="ts",
                         query_id=key.store)


def make(key: StoreKey) -> Any:
    return _tests("dedup").Dedup() if _kind(key) == "dedup" else _tests("sessions").Sessions()


@lru_cache(maxsize=64)
def batches(key: StoreKey, upto: int) -> tuple:
    """The reference ``Batch``es 0..``upto`` of ``key`` (input, processing time, watermarks): pure."""
    import pandas as pd

    reference = _tests("reference")
    out: list = []
    watermark, newest = None, None
    for b in range(upto + 1):
        rng = random.Random(zlib.crc32(f"{key.store}/{b}".encode()))
        at = BASE_MS + b * STEP_MS
        if _kind(key) == "dedup":
            n = rng.randint(0, 3)
            data = pd.DataFrame({"id": [f"i{rng.randrange(6)}" for _ in range(n)],
                                 "value": [rng.randrange(1000) for _ in range(n)]}) if n else None
            out.append(reference.Batch(data, at=at))
            continue
        n = rng.choice([0, 1, 2, 3])
        if n:  # event time runs 20 s a batch, on a 5 s grid: some events at or below the watermark (late)
            times = [BASE_MS + EVENT_STEP_MS * b + 5_000 * rng.randrange(-3, 2) for _ in range(n)]
            data = pd.DataFrame({"user": [f"u{rng.randrange(6)}" for _ in range(n)],
                                 "ts": pd.to_datetime(times, unit="ms", utc=True)})
        else:
            data = None
        out.append(reference.Batch(data, at=at, watermark=watermark, late=watermark))
        newest = BASE_MS + EVENT_STEP_MS * b if data is None else max(times + ([newest] if newest else []))
        from blobstate.spark.processor import advance_watermark

        watermark = advance_watermark(watermark, newest, _tests("sessions").WATERMARK_DELAY_MS)
    return tuple(out)


def reference(key: StoreKey, upto: int) -> tuple[list, dict]:
    """(outputs per batch, state) of the reference fold over batches 0..``upto`` (``upto`` -1: nothing)."""
    if upto < 0:
        return [], {}
    reference_module = _tests("reference")
    fold = reference_module.dedup_ref if _kind(key) == "dedup" else reference_module.sessions_ref
    return fold(list(batches(key, upto)))  # type: ignore[no-any-return]


def state_of(key: StoreKey, db: MemoryDB) -> dict:
    """The processor state in ``db`` as the reference states it, read raw (every value, expired or not)."""
    from blobstate.spark.processor import StateReader

    if not db.values:
        return {}
    reader = StateReader(db)
    if _kind(key) == "dedup":
        return {r["key"]["id"]: r["value"]["ttlExpirationMs"] for r in reader.read_variable("seen").to_pylist()}
    sessions = {r["key"]["user"]: [r["value"]["start_ms"], r["value"]["last_ms"], r["value"]["events"]]
                for r in reader.read_variable("session").to_pylist()}
    timers = sorted((r["key"]["user"], r["expiration_timestamp_ms"]) for r in reader.read_timers().to_pylist())
    gap = _tests("sessions").GAP_MS
    if timers != sorted((user, s[1] + gap) for user, s in sessions.items()):
        raise Violation("timers", f"{key}: timers {timers} are not one per open session at its end "
                                  f"({sessions})")
    return sessions


def check_state(key: StoreKey, db: MemoryDB, upto: int, where: str) -> None:
    """Raise ``Violation`` unless ``db`` (the state committed by batch ``upto``) is the reference's."""
    got, want = state_of(key, db), reference(key, upto)[1]
    if _kind(key) == "dedup":
        expired = sorted(k for k, exp in got.items() if exp <= batches(key, upto)[-1].at) if upto >= 0 else []
        if expired:
            raise Violation("ttl", f"{where}: {key} after batch {upto} still holds {expired}, past their TTL")
    if got != want:
        raise Violation("processor", f"{where}: {key} after batch {upto} holds {got}, the reference {want}")


# -- restore and commit ---------------------------------------------------------------------------------------------
def restore(repo: Repository, key: StoreKey, scratch: str) -> tuple[MemoryDB, int]:
    """The latest committed state of ``key`` and its batch id (-1: none), restored with the real restore."""
    try:
        chain = replay.plan(repo, key)
    except NothingToRestore:
        return MemoryDB(), -1
    values: dict[bytes, bytes] = {}
    if chain.snapshot is not None:
        restore_snapshot(repo, chain.snapshot, scratch, local_store=DirStore(), force=True, validate=False)
        for name in os.listdir(scratch):
            with open(os.path.join(scratch, name), encoding="ascii") as fh:
                values[bytes.fromhex(name)] = bytes.fromhex(fh.read())
        shutil.rmtree(scratch, ignore_errors=True)
    db = MemoryDB(values)
    for delta in chain.deltas:
        db.apply(changelog.decode(repo.read_changelog(delta), source=delta.changelog_blob_id))
    upto = chain.upto if chain.upto is not None else (chain.snapshot.batch_id if chain.snapshot else -1)
    return db, -1 if upto is None else upto


def _write_snapshot_dir(path: str, db: MemoryDB) -> None:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    for k, v in db.values.items():
        with open(os.path.join(path, k.hex()), "w", encoding="ascii") as fh:
            fh.write(v.hex())


def processor(sim: Simulation, actor: Actor, *, key: StoreKey, retain: int, batches_to_run: int,
              snapshot_every: int = 3, interval_ms: int = 0, log: str = "log") -> None:
    import pyarrow as pa

    from blobstate.model import layout
    from blobstate.spark.processor import run_batch
    from blobstate.spark.processor.runner import BatchTimes

    repo = sim.open_repo(log)
    if repo is None:
        return
    committer = pinned_committer(sim, actor, key, repo, retain)
    try:
        db, upto = restore(repo, key, sim.local_dir(actor, "restore", create=False))
        check_state(key, db, upto, f"{actor.name}'s restore")
        spec, deltas = spec_of(key), DeltaCommitter(committer)
        for batch in range(upto + 1, upto + 1 + batches_to_run):
            if batch > upto + 1 and interval_ms:
                layout.sleep(interval_ms / 1000)
            b = batches(key, batch)[-1]
            staged = StagedWrites(db)
            data = None if b.data is None else pa.Table.from_pandas(b.data, preserve_index=False)
            result = run_batch(make(key), staged, data, spec, BatchTimes(batch, b.at, b.watermark, b.late))
            ops = staged.ops()
            deltas.commit_changelog(changelog.encode(ops), batch_id=batch, query_id=key.store)
            db.apply(ops)
            _outputs(sim, key).setdefault(batch, []).append((actor.name, result.output.to_pylist()))
            if (batch + 1) % snapshot_every == 0:
                live = sim.local_dir(actor, "live", create=False)
                _write_snapshot_dir(live, db)
                committer.upload(committer.checkpoint(live, batch_id=batch, query_id=key.store))
    except (BlobstateError, OSError):
        return  # fenced, refused, unknown outcome: the process exits, the invariants judge what it left
    finally:
        committer.close()


def _outputs(sim: Simulation, key: StoreKey) -> dict[int, list[tuple[str, list]]]:
    outputs: dict = sim.__dict__.setdefault("processor_outputs", {})
    return outputs.setdefault(key, {})  # type: ignore[no-any-return]


# -- the profile's part ---------------------------------------------------------------------------------------------
def add(rng: random.Random, specs: list[ActorSpec], faults: list[Fault], ttl_ms: int) -> None:
    """Per processor store: its query (``p?1``) and a restart of it later (``p?2``, a new process on the same
    store), each maybe killed (work directory kept or lost) or paused past the TTL at one of its scheduling
    points."""
    for tag, key in (("d", DEDUP), ("s", SESSIONS)):
        for i, start in ((1, 0), (2, rng.randint(ttl_ms // 4, 3 * ttl_ms))):
            name = f"p{tag}{i}"
            specs.append(ActorSpec(name, "processor", start, rng.randint(-ttl_ms // 5, ttl_ms // 5),
                                   dict(key=key, retain=2, batches_to_run=rng.randint(3, 8),
                                        snapshot_every=rng.choice([2, 3, 4]),
                                        interval_ms=rng.randint(ttl_ms // 60, ttl_ms // 6))))
            roll = rng.random()
            if roll < 0.5:
                faults.append(Fault("kill", name, rng.randint(1, 80), keep=rng.random() < 0.6))
            elif roll < 0.7:
                faults.append(Fault("pause", name, rng.randint(1, 80), ms=rng.randint(ttl_ms, 3 * ttl_ms)))


def prepare(sim: Simulation) -> None:
    """Nothing to set up: the stores start empty."""


def check(sim: Simulation) -> None:
    """Every batch committed twice (a re-run after a restart, a zombie's) emitted the same output."""
    for key in (DEDUP, SESSIONS):
        for batch, runs in _outputs(sim, key).items():
            if any(_canonical(rows) != _canonical(runs[0][1]) for _, rows in runs):
                raise Violation("processor", f"{key} batch {batch} emitted different outputs: {runs}")


def final(sim: Simulation) -> None:
    """Each committed batch's output was the reference's (a timer fired in the batch the reference fires it, and
    only there), and the latest committed state of each processor store restores to the reference's (unless a
    fault lost or damaged an object of that store: then a restore may fail, as the other stores' may)."""
    check(sim)
    repo = sim.repos["log"]
    for key in (DEDUP, SESSIONS):
        recorded = _outputs(sim, key)  # each recorded when its commit returned
        expected = reference(key, max(recorded))[0] if recorded else []
        for batch, runs in sorted(recorded.items()):
            if _canonical(runs[0][1]) != _canonical(expected[batch]):
                raise Violation("processor", f"{key} batch {batch} emitted {runs[0][1]}, the reference "
                                             f"{expected[batch]}")
        try:
            db, upto = restore(repo, key, os.path.join(sim.base, "final-processor", key.store))
        except BlobstateError:
            if any(blob.startswith(key.prefix + "/") for blob in sim.world.damaged):
                continue
            raise
        if recorded and upto < max(recorded):
            raise Violation("processor", f"{key}: batch {max(recorded)} was committed, the latest restores {upto}")
        check_state(key, db, upto, "the end")


def _canonical(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted(r.items())) for r in rows)


__all__ = ["DEDUP", "SESSIONS", "MemoryDB", "add", "check", "final", "prepare", "processor", "restore"]
