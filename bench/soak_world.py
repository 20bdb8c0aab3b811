"""The soak's world: one repository, one simulated clock, and the hosts that run real ``blobstate`` processes.

- ``SimClock``: simulated time = real time + an offset that only grows. Every process of the soak reads it (the
  ``soak_plugin`` test plugin shifts ``time.time()`` by the offset at start; ``gc`` gets ``--now``), so the TTL
  expiries writers record and the expiries gc compares them with agree, as on hosts with synchronised clocks. A
  clock jump happens only while every writer is stopped (SIGSTOP) or not running; a stopped writer is resumed with
  its clock moved by the jumps it slept through (``pause_plugin``).
- ``Writer``: a host with its own RocksDB (written by ``fixtures_core.write_keys``) and its own work directory,
  backing up under the one store key every writer shares (racing writers fence each other: exit 4).
- ``Proc``: one ``blobstate`` subprocess (backup, gc, recover, restore) with its output, trace (``soak_plugin``)
  and fault (SIGKILL after a journal event, SIGSTOP after one, gc stopped after its decision or its re-check).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).resolve().parent.parent / "tests" / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))

from fault_harness import Target, send_cont, stopped_or_exited  # noqa: E402
from fixtures_core import cli_env, read_all, write_keys  # noqa: E402

from blobstate.model.records import StoreKey  # noqa: E402

KEY = StoreKey("soak", "0", "state")
WAIT_S = 300.0  # a process that takes longer than this is a wedge
# gc's re-check bound (``blobstate.maintenance.gc.RECHECK_AFTER_S``, 5 s) scaled down with the soak's pauses (a held gc
# is held for at least ``GC_HOLD_S``; a real gc host paused by its hypervisor for minutes)
GC_RECHECK_AFTER_S = 0.5
GC_HOLD_S = 1.0


class SimClock:
    """Simulated time in ms: real time plus ``offset_ms``, which only grows (``jump``)."""

    def __init__(self) -> None:
        self.offset_ms = 0
        self.start_ms = self.now_ms()

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.offset_ms

    def jump(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("the simulated clock only moves forward")
        self.offset_ms += ms

    def elapsed_hours(self) -> float:
        return (self.now_ms() - self.start_ms) / 3_600_000


def digest(items: dict[bytes, bytes]) -> str:
    """SHA-256 over a store's sorted key/value pairs: what a snapshot of it must restore to."""
    h = hashlib.sha256()
    for k in sorted(items):
        h.update(len(k).to_bytes(4, "big") + k + len(items[k]).to_bytes(4, "big") + items[k])
    return h.hexdigest()


@dataclass
class Proc:
    """One ``blobstate`` subprocess; ``fault``: ``""``, ``kill:EVENT[:N]``, ``pause:EVENT[:N]`` or ``gc-stop``."""

    kind: str
    host: str
    popen: subprocess.Popen
    folder: Path
    offset_ms: int  # the simulated clock's offset when it started (its own clock's)
    fault: str = ""
    attempt: int | None = None
    ttl_ms: int = 0
    stopped_offset_ms: int | None = None  # the offset when it was seen stopped
    returncode: int | None = None

    @property
    def trace(self) -> list[list[str]]:
        path = self.folder / "trace"
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    def out(self) -> str:
        return (self.folder / "out").read_text(errors="replace")

    def err(self) -> str:
        return (self.folder / "err").read_text(errors="replace")

    def json(self) -> Any:
        try:
            return json.loads(self.out())
        except ValueError:
            return None

    def commit_id(self) -> str | None:
        """The id of the commit this backup started (its ``CommitStarted``), if it got that far."""
        return next((t[1] for t in self.trace if t[0] == "CommitStarted"), None)

    def lists(self) -> dict[str, int]:
        """Listings the process made, ``total`` and by what they walked (written at a clean exit only)."""
        line = next((t for t in self.trace if t[0] == "LIST"), None)
        return {"total": int(line[1]), **{k: int(v) for k, v in (f.split("=") for f in line[2:])}} if line else {}

    def wait_stopped(self, clock: SimClock) -> bool:
        """True once the process stopped itself at its fault; False when it exited first (never reached it)."""
        try:
            stopped = stopped_or_exited(self.popen, WAIT_S)
        except AssertionError:  # neither stopped nor ended in time: it was killed
            raise TimeoutError(f"{self.kind} on {self.host} neither reached {self.fault} nor ended in {WAIT_S:.0f} s: "
                               f"{self.err()[-2000:]}") from None
        if stopped:
            self.stopped_offset_ms = clock.offset_ms
        return stopped

    def resume(self, clock: SimClock) -> None:
        """SIGCONT (without waiting), moving a stopped writer's clock by the jumps it slept through (a gc reads only
        its ``--now``)."""
        jumped = clock.offset_ms - (self.stopped_offset_ms or 0)
        send_cont(self.popen, clock_file=None if self.kind == "gc" else self.folder / "clock", advance_ms=jumped)
        self.stopped_offset_ms = None

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()

    def finish(self) -> int:
        """Wait for the process (a stopped one is never waited for: resume or kill it first); its exit code.
        Raises ``TimeoutError`` (after killing it) when it does not end within ``WAIT_S``: a wedge."""
        try:
            self.returncode = self.popen.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            raise TimeoutError(f"{self.kind} on {self.host} did not finish in {WAIT_S:.0f} s: "
                               f"{self.err()[-2000:]}") from None
        return self.returncode


@dataclass
class World:
    """The repository, the clock, the processes started (all stopped by PID at the end) and the hosts' dirs."""

    root: Path
    target: Target
    clock: SimClock = field(default_factory=SimClock)
    procs: list[Proc] = field(default_factory=list)
    seq: int = 0

    def spawn(self, kind: str, host: str, work: Path, args: list[str], *, fault: str = "", attempt: int | None = None,
              ttl_ms: int = 0, now_arg: bool = False, program: list[str] | None = None) -> Proc:
        """Start ``blobstate ARGS`` (or ``python PROGRAM ARGS``) for ``host`` (its work directory ``work``) on the
        simulated clock."""
        self.seq += 1
        folder = self.root / "procs" / f"{self.seq:06d}-{kind}-{host}"
        folder.mkdir(parents=True)
        plugins = ["soak_plugin"]
        env = {**cli_env(work), **self.target.env, "BLOBSTATE_TEST_CLOCK_OFFSET_MS": str(self.clock.offset_ms),
               "BLOBSTATE_TEST_TRACE_FILE": str(folder / "trace")}
        how, _, event = fault.partition(":")
        if how == "kill":
            plugins.append("kill_plugin")
            env["BLOBSTATE_TEST_KILL_AT"] = event
        elif how == "pause":
            plugins.append("pause_plugin")
            env.update(BLOBSTATE_TEST_PAUSE_AT=event, BLOBSTATE_TEST_CLOCK_FILE=str(folder / "clock"))
        elif how == "gc-stop":  # stopped after its N-th log read: N=1 decided, N=2 re-checked, about to delete
            env.update(BLOBSTATE_TEST_STOP_AFTER_LOG_READ=event or "1", BLOBSTATE_TEST_GC_RECHECK_AFTER_S=str(
                GC_RECHECK_AFTER_S))
        env["BLOBSTATE_PLUGINS"] = ",".join(plugins)
        now = ["--now", str(self.clock.now_ms())] if now_arg else []
        with open(folder / "out", "wb") as out, open(folder / "err", "wb") as err:
            popen = subprocess.Popen([sys.executable, *(program or ["-m", "blobstate.cli"]), *args, *now], stdout=out,
                                     stderr=err, env=env)
        proc = Proc(kind, host, popen, folder, self.clock.offset_ms, fault, attempt, ttl_ms)
        self.procs.append(proc)
        return proc

    def repo_args(self) -> list[str]:
        return self.target.args(KEY)

    def gc(self, ttl_ms: int, *, fault: str = "") -> Proc:
        return self.spawn("gc", "gc", self.root / "gc-host", ["gc", "--repo", self.target.url, "--ttl", str(ttl_ms),
                                                               "--json"], fault=fault, now_arg=True)

    def running(self) -> list[Proc]:
        return [p for p in self.procs if p.popen.poll() is None]

    def stop_all(self) -> None:
        """Kill every process this soak started that is still alive (by PID), stopped ones included."""
        for proc in self.running():
            proc.kill()
            proc.popen.wait()


@dataclass
class Attempt:
    """One backup attempt: its writer, the data the store held when it started, what became of it."""

    number: int
    writer: str
    digest: str
    keys: int
    fault: str
    commit_id: str | None = None
    returncode: int | None = None


class Writer:
    """A writer host: its own RocksDB (``db``), its own work directory, one process at a time."""

    def __init__(self, world: World, name: str, seed: int, *, keys: int = 400, value_size: int = 120) -> None:
        self.world = world
        self.name = name
        self.db = world.root / f"host-{name}" / "db" / KEY.store
        self.work = world.root / f"host-{name}" / "work"
        self.db.parent.mkdir(parents=True)
        self.value_size = value_size
        self.next_key = keys
        self.seed = seed
        write_keys(self.db, n=keys, value_size=value_size, seed=seed)

    def mutate(self, rnd: Any) -> tuple[str, int]:
        """Write a few new keys and overwrite a few old ones (one flushed SST); the store's digest and size."""
        new = rnd.randint(5, 40)
        items = {f"key{i:08d}".encode(): rnd.randbytes(self.value_size)
                 for i in range(self.next_key, self.next_key + new)}
        for _ in range(rnd.randint(0, 10)):
            items[f"key{rnd.randrange(self.next_key):08d}".encode()] = rnd.randbytes(self.value_size)
        self.next_key += new
        write_keys(self.db, items)
        data = read_all(self.db)
        return digest(data), len(data)

    def backup(self, attempt: Attempt, *, ttl_ms: int, retain: int) -> Proc:
        args = ["backup", str(self.db), *self.world.repo_args(), "--store-type", "rocksdb", "--ttl", str(ttl_ms),
                "--retain", str(retain), "--batch-id", str(attempt.number), "--json", "-q"]
        return self.world.spawn("backup", self.name, self.work, args, fault=attempt.fault, attempt=attempt.number,
                                ttl_ms=ttl_ms)

    def recover(self, *, fault: str = "") -> Proc:
        return self.world.spawn("recover", self.name, self.work, ["recover", *self.world.repo_args(), "--json"],
                                fault=fault)
