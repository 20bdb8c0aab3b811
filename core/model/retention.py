"""Retention policies: which checkpoints a store keeps, with restic's ``forget`` semantics. Pure.

A ``RetentionPolicy`` combines rules, each keeping some snapshots and saying why (restic's ``ExpirePolicy``,
``internal/data/snapshot_policy.go``; the semantics of restic 0.16 and later):

- ``last`` N: the N newest snapshots;
- ``within`` D: every snapshot made within D of the newest one (not of the clock: a store that stopped committing
  keeps its history); D in the house units (``2d``, ``12h``, ``90min``, ``2w``) plus calendar months (``mo``) and
  years (``y``), subtracted as calendar dates, as restic does (a bare ``m`` is refused: minutes or months?);
- ``hourly``, ``daily``, ``weekly`` (ISO weeks), ``monthly``, ``yearly`` N: walking from the newest snapshot to the
  oldest, the first snapshot of each new hour (day, ...) is kept, until N of them are; when the oldest snapshot is
  reached with counts left it is kept too (``oldest daily``: the longest history the counts allow). A count of
  ``-1`` keeps every bucket. Calendar buckets are taken in UTC.

A snapshot kept by several rules lists every one. A policy with no rule keeps nothing and is refused
(``ConfigurationError``); ``RetentionPolicy(last=N)`` is ``--retain N`` and keeps exactly what
``blobstate.model.chain.retention`` keeps.

What a policy keeps in a checkpoint log (``plan_retention``) follows the chain rule of ``blobstate.model.chain``:

- A log without deltas: every record is a snapshot; the policy picks the records kept.
- A log with deltas: the policy picks among the current run's valid snapshots (``chain.valid_snapshots``); the
  newest one is always kept (a Spark restart restores it), and with it every delta after it; the deltas after the
  oldest snapshot that ``last`` or ``within`` keeps are kept too (every batch of that window restores), as
  ``--retain`` always did. A snapshot a calendar rule keeps stands alone. A run without a snapshot is kept whole.
- A partitioned store's group records: each partition's records follow the rule above; a group record is kept
  when any partition keeps its part, and then whole (a group's partitions are never split). After a key-grouped
  store's rescale at restart from N to M < N partitions, partitions M..N-1 no longer exist
  (``chain.live_partitions``): their records live on only inside the old group records a live partition still
  keeps (its last snapshots may be the old partitioning's), and go with them.
- The newest record is always kept (the log's generation; fencing).
- Whatever is kept must restore exactly what it restored before: no snapshot may become valid that was not, the
  latest state's chain and each kept batch's delta must stay the same records. When dropping interior records
  would break that (records of two runs interleaved, a re-run delta), the whole suffix from the oldest record
  kept is kept instead: ``chain.retention``'s prefix form, which never breaks a chain.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta

import msgspec

from blobstate.errors import ConfigurationError, NothingToRestore
from blobstate.model import chain
from blobstate.model.records import SNAPSHOT, Checkpoint

ALL = -1  # a count that keeps every bucket (restic's "unlimited")
KEEP_ALL = (1 << 31) - 1  # the count a journal records for a policy: a fallback to it prunes nothing
#: Calendar rules, newest bucket first: (field, bucket of a UTC time).
CALENDAR: tuple[tuple[str, Callable[[datetime], tuple[int, ...]]], ...] = (
    ("hourly", lambda t: (t.year, t.month, t.day, t.hour)),
    ("daily", lambda t: (t.year, t.month, t.day)),
    ("weekly", lambda t: tuple(t.isocalendar()[:2])),
    ("monthly", lambda t: (t.year, t.month)),
    ("yearly", lambda t: (t.year,)),
)
WINDOW_RULES = ("last", "within")  # rules whose kept snapshots form a window every batch of which restores
_SPAN_PART = re.compile(r"(\d+)\s*(ms|min|mo|s|m|h|d|w|y)", re.IGNORECASE)
_SPAN_MS = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}


# A msgspec Struct, not a dataclass: created in ~0.05 ms instead of ~0.5 ms at start-up (issue 31).
class Span(msgspec.Struct, frozen=True):
    """A calendar duration: ``years`` and ``months`` (calendar arithmetic) and ``days`` (calendar days), then
    ``ms`` milliseconds; ``text`` as given."""

    years: int = 0
    months: int = 0
    days: int = 0
    ms: int = 0
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> Span:
        """``2d``, ``1y2mo3d4h``, ``90min``, ``2w``; raises ``ConfigurationError`` (a bare ``m`` included)."""
        clean = str(text).strip().replace(" ", "").lower()
        parts = _SPAN_PART.findall(clean)
        if not clean or "".join(n + u for n, u in parts) != clean:
            raise ConfigurationError(f"not a --keep-within duration: {text!r} (examples: 2d, 12h, 90min, 2w, 6mo, 1y)")
        years = months = days = ms = 0
        for number, unit in parts:
            n = int(number)
            if unit == "m":
                raise ConfigurationError(f"--keep-within {text!r}: 'm' is ambiguous; write 'min' for minutes or "
                                         "'mo' for months")
            if unit == "y":
                years += n
            elif unit == "mo":
                months += n
            elif unit == "d":
                days += n
            else:
                ms += n * _SPAN_MS[unit]
        if not (years or months or days or ms):
            raise ConfigurationError(f"--keep-within {text!r} is zero")
        return cls(years, months, days, ms, clean)

    def before(self, moment: datetime) -> datetime:
        """``moment`` minus this span: years, months and days as calendar dates (an overflowing day rolls into the
        next month, as Go's ``Time.AddDate`` does), then the milliseconds."""
        month0 = moment.month - 1 - self.months
        year = moment.year - self.years + month0 // 12
        first = moment.replace(year=year, month=month0 % 12 + 1, day=1)
        return first + timedelta(days=moment.day - 1 - self.days) - timedelta(milliseconds=self.ms)


@dataclass(frozen=True)
class RetentionPolicy:
    """Which snapshots a store keeps (see the module docstring). Counts are >= 1, ``ALL`` (-1) or 0 (rule off);
    ``within`` is a ``Span`` text (``""``: off)."""

    last: int = 0
    within: str = ""
    hourly: int = 0
    daily: int = 0
    weekly: int = 0
    monthly: int = 0
    yearly: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "within":
                if value:
                    Span.parse(value)
            elif not isinstance(value, int) or isinstance(value, bool) or value < ALL:
                raise ConfigurationError(f"--keep-{f.name} must be a count >= 1 (or -1 for all), not {value!r}")
        if self.is_empty:
            raise ConfigurationError("a retention policy needs at least one rule (--retain/--keep-last N, "
                                     "--keep-within, --keep-hourly/daily/weekly/monthly/yearly N)")

    @property
    def is_empty(self) -> bool:
        return not self.within and not any(getattr(self, name) for name in ("last", *dict(CALENDAR)))

    @property
    def only_last(self) -> int | None:
        """N when the policy is ``last=N`` alone (``--retain N``), else None."""
        others = self.within or any(getattr(self, name) for name in dict(CALENDAR))
        return None if others or self.last < 1 else self.last

    def text(self) -> str:
        """The recorded form, ``last=3,within=2d,daily=7`` (rules in a fixed order; ``parse`` reads it back)."""
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name))

    def describe(self) -> str:
        """``keep the last 3, within 2d of the newest, 7 daily`` for messages."""
        words = [f"the last {self.last}" if self.last > 0 else "all" if self.last == ALL else ""]
        words.append(f"within {self.within} of the newest" if self.within else "")
        words += [f"{'all' if getattr(self, n) == ALL else getattr(self, n)} {n}" for n in dict(CALENDAR)
                  if getattr(self, n)]
        return "keep " + ", ".join(w for w in words if w)

    @classmethod
    def parse(cls, text: str) -> RetentionPolicy:
        """Read ``text()``'s form; raises ``ConfigurationError`` naming what is wrong."""
        values: dict[str, int | str] = {}
        names = {f.name for f in fields(cls)}
        for item in filter(None, (part.strip() for part in str(text).split(","))):
            name, sep, value = item.partition("=")
            if not sep or name not in names or name in values:
                raise ConfigurationError(f"not a retention policy: {text!r} (form: last=3,within=2d,daily=7)")
            try:
                values[name] = value if name == "within" else int(value)
            except ValueError:
                raise ConfigurationError(f"retention policy {text!r}: {name} must be a count") from None
        return cls(**values)  # type: ignore[arg-type]

    @classmethod
    def of(cls, retain: int | RetentionPolicy | str | None, default: int | None = None) -> RetentionPolicy:
        """A policy from ``--retain N`` (an int), a policy, its text, or ``default`` (``last=default``) for None.
        Raises ``ConfigurationError``."""
        if isinstance(retain, RetentionPolicy):
            return retain
        if isinstance(retain, str):
            return cls.parse(retain)
        value = retain if retain is not None else default
        if value is None:
            raise ConfigurationError("no retention policy given")
        return cls(last=max(1, int(value)))


def apply_policy(times_ms: Sequence[int], policy: RetentionPolicy, *,
                 now_ms: int | None = None) -> list[tuple[str, ...]]:
    """restic's ``ApplyPolicy`` on snapshot times (ms since the epoch, any order): for each time, in input order,
    the rules that keep it (``()``: it expires). Ties in time keep their input order (a stable sort, newest
    first). ``within`` counts back from the newest time that is not in the future (``now_ms``, default: the
    newest time itself)."""
    order = sorted(range(len(times_ms)), key=lambda i: -times_ms[i])  # stable: newest first
    reasons: list[tuple[str, ...]] = [() for _ in times_ms]
    if not order:
        return reasons
    past = [t for t in times_ms if now_ms is None or t < now_ms]
    latest = _utc(max(past)) if past else None
    since = _utc_ms(Span.parse(policy.within).before(latest)) if policy.within and latest is not None else None
    counts = {"last": policy.last, **{name: getattr(policy, name) for name, _ in CALENDAR}}
    previous: dict[str, object] = {}
    buckets: dict[str, Callable[[datetime], object]] = {"last": lambda _t: object(), **dict(CALENDAR)}
    for position, i in enumerate(order):
        moment = _utc(times_ms[i])
        oldest = position == len(order) - 1
        why: list[str] = []
        if policy.within and (since is None or times_ms[i] > since):
            why.append(f"within {policy.within}")
        for name, bucket_of in buckets.items():
            if counts[name] == 0:
                continue
            bucket = bucket_of(moment)
            if bucket != previous.get(name) or oldest:
                why.append(f"oldest {name}" if bucket == previous.get(name) else name)
                previous[name] = bucket
                if counts[name] > 0:
                    counts[name] -= 1
        reasons[i] = tuple(why)
    return reasons


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _utc_ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


# A msgspec Struct, not a dataclass: created in ~0.05 ms instead of ~0.5 ms at start-up (issue 31).
class RetentionPlan(msgspec.Struct, frozen=True):
    """What a policy keeps of a log: ``expiring`` and ``retained`` records (by generation), and per retained
    record (``(checkpoint id, generation)``) the rules that keep it (``"needed by ..."`` for the chain rule)."""

    expiring: list[Checkpoint]
    retained: list[Checkpoint]
    reasons: dict[tuple[str, int], tuple[str, ...]]

    def why(self, cp: Checkpoint) -> tuple[str, ...]:
        return self.reasons.get((cp.checkpoint_id, cp.generation), ())

    def carried_out(self, can_forget: bool) -> tuple[list[Checkpoint], list[Checkpoint]]:
        """``(expiring, retained)`` as a log carries them out: one that cannot forget records inside it
        (``CheckpointLog.can_forget``) keeps the expiring records newer than the oldest one kept, with their
        blobs; only the prefix below it expires."""
        if can_forget or not self.retained:
            return self.expiring, self.retained
        first = self.retained[0].generation
        inside = [cp for cp in self.expiring if cp.generation > first]
        if not inside:
            return self.expiring, self.retained
        for cp in inside:
            self.reasons[_k(cp)] = ("kept: the checkpoint log cannot drop a record inside it",)
        return ([cp for cp in self.expiring if cp.generation < first],
                sorted([*self.retained, *inside], key=lambda cp: cp.generation))

    def to_json(self) -> list[dict[str, object]]:
        """Per retained record: ``checkpointId``, ``generation``, ``batchId``, ``kind``, ``reasons``."""
        return [{"checkpointId": cp.checkpoint_id, "generation": cp.generation, "batchId": cp.batch_id,
                 "kind": cp.kind, "reasons": list(self.why(cp))} for cp in self.retained]


def plan_retention(history: Sequence[Checkpoint], policy: RetentionPolicy | int, *,
                   now_ms: int | None = None) -> RetentionPlan:
    """What ``policy`` keeps of ``history`` (a store's records, oldest generation first; see the module
    docstring). ``now_ms``: the clock ``within`` may not count from beyond (records from the future)."""
    policy = RetentionPolicy.of(policy)
    history = list(history)
    if not history:
        return RetentionPlan([], [], {})
    n = policy.only_last
    if n is not None:  # --retain N: exactly chain.retention
        expiring, retained = chain.retention(history, n)
        kept = set(map(id, _newest_snapshots(history, n)))
        return RetentionPlan(expiring, retained, {_k(cp): ("last",) if id(cp) in kept else ("needed by the chain",)
                                                   for cp in retained})
    if chain.has_groups(history):
        reasons = _group_keep(history, policy, now_ms)
    else:
        reasons = _keep(history, policy, now_ms)
    reasons.setdefault(_k(history[-1]), ("newest record",))
    retained = [cp for cp in history if _k(cp) in reasons]
    if not _restores_the_same(history, retained):
        first = retained[0].generation
        retained = [cp for cp in history if cp.generation >= first]
        for cp in retained:
            reasons.setdefault(_k(cp), ("needed by the chain (records of runs or re-runs interleaved)",))
    keep = {_k(cp) for cp in retained}
    return RetentionPlan([cp for cp in history if _k(cp) not in keep], retained,
                         {k: v for k, v in reasons.items() if k in keep})


def _k(cp: Checkpoint) -> tuple[str, int]:
    return cp.checkpoint_id, cp.generation


def _newest_snapshots(history: Sequence[Checkpoint], n: int) -> list[Checkpoint]:
    snaps = chain.valid_snapshots(history) if chain.has_deltas(history) else list(history)
    return snaps[-n:]


def _keep(history: Sequence[Checkpoint], policy: RetentionPolicy,
          now_ms: int | None) -> dict[tuple[str, int], tuple[str, ...]]:
    """The records of one chain (a store's, or one partition's) ``policy`` keeps, with their reasons."""
    if not chain.has_deltas(history):
        why = apply_policy([cp.created_time_ms for cp in reversed(history)], policy, now_ms=now_ms)
        return {_k(cp): w for cp, w in zip(reversed(history), why, strict=True) if w}
    run = chain.current_run(history)
    snaps = chain.valid_snapshots(run)
    if not snaps:  # the empty state and every delta of the run make its states: keep the run whole
        return {_k(cp): ("the current run has no snapshot yet",) for cp in run}
    newest_first = list(reversed(snaps))
    why = apply_policy([s.created_time_ms for s in newest_first], policy, now_ms=now_ms)
    out = {_k(s): w for s, w in zip(newest_first, why, strict=True) if w}
    out.setdefault(_k(snaps[-1]), ("the latest state",))
    window = [s for s, w in zip(newest_first, why, strict=True) if any(_window_rule(r) for r in w)]
    base = min((s.batch_id for s in window if s.batch_id is not None), default=snaps[-1].batch_id)
    for d in run:
        if d.is_delta and d.batch_id is not None and base is not None and d.batch_id > base:
            out.setdefault(_k(d), ("needed by the chain",))
    return out


def _window_rule(reason: str) -> bool:
    """True for a reason of ``last`` or ``within`` (``WINDOW_RULES``)."""
    return reason.split()[0] in WINDOW_RULES or reason == "oldest last"


def _group_keep(history: Sequence[Checkpoint], policy: RetentionPolicy,
                now_ms: int | None) -> dict[tuple[str, int], tuple[str, ...]]:
    """Group records: a record is kept, whole, when any live partition (``chain.live_partitions``) keeps its part
    (reasons merged)."""
    by_generation: dict[int, set[str]] = {}
    for p in chain.live_partitions(history):
        records = chain.partition_history(history, p)
        for (_, generation), why in _keep(records, policy, now_ms).items():
            by_generation.setdefault(generation, set()).update(why)
    return {_k(cp): tuple(sorted(by_generation[cp.generation])) for cp in history if cp.generation in by_generation}


def _restores_the_same(history: list[Checkpoint], retained: list[Checkpoint]) -> bool:
    """True when ``retained`` restores nothing ``history`` does not: per chain (each partition's, for groups), no
    snapshot valid that was not, the same latest state, and the same delta for every batch it keeps."""
    if not chain.has_deltas(history):
        return True
    chains = ([(chain.partition_history(history, p), chain.partition_history(retained, p))
               for p in chain.live_partitions(history)] if chain.has_groups(history) else [(history, retained)])
    for before, after in chains:
        if not {_k(s) for s in chain.valid_snapshots(after)} <= {_k(s) for s in chain.valid_snapshots(before)}:
            return False
        old, new = chain.latest_deltas(chain.current_run(before)), chain.latest_deltas(chain.current_run(after))
        if any(_k(old.get(b, d)) != _k(d) for b, d in new.items()):
            return False
        try:
            was = [_k(cp) for cp in chain.plan_chain(before).records]
        except NothingToRestore:
            continue
        try:
            if [_k(cp) for cp in chain.plan_chain(after).records] != was:
                return False
        except NothingToRestore:
            return False
    return True


#: Snapshots per partition a partitioned store's writer keeps unless told otherwise (``blobstate.spark.partitioned``'s
#: ``retain``), with the deltas after the oldest of them. Recorded nowhere gc reads: gc states it (``GROUP_RETENTION``).
PARTITIONED_RETAIN = 3
GROUP_RETENTION = ("a partitioned store ({partitions} partitions) is pruned by its writer after its group commits: "
                   f"by default it keeps the last {PARTITIONED_RETAIN} snapshots of each partition and the deltas "
                   "after them (the writer's retain=, recorded in no record gc reads); gc itself keeps every "
                   "checkpoint (--retain or --keep-* apply one here)")


def recorded_policy(index: object) -> RetentionPolicy | None:
    """The policy a snapshot index records (``retentionPolicy``, else ``retainCheckpoints`` as ``last``), or None
    when it records none (or one this version cannot read: then nothing is pruned by it)."""
    text = getattr(index, "retention_policy", None)
    if text:
        try:
            return RetentionPolicy.parse(text)
        except ConfigurationError:
            return None
    retain = getattr(index, "retain", None)
    return RetentionPolicy(last=retain) if retain else None


def recorded_fields(policy: RetentionPolicy) -> tuple[int | None, str | None]:
    """``(retainCheckpoints, retentionPolicy)`` an index records for ``policy``: a count alone as before, anything
    else as text with no count (an older reader then prunes nothing instead of applying a count)."""
    n = policy.only_last
    return (n, None) if n is not None else (None, policy.text())


def read_ahead(opened: Sequence[Checkpoint] | None, policy: RetentionPolicy) -> list[Checkpoint]:
    """The records of ``opened`` (a store's log as a committer opened on it, oldest first) whose indexes the
    retention after its next snapshot will read: all of them when a count policy (``--retain N``) will then drop
    one from a log of snapshots only; none otherwise. A read ahead (``StoreCommitter`` reads them beside the
    previous index), never a decision: retention reads the log again after the append and reads what it lacks."""
    last = policy.only_last
    if not opened or last is None or any(cp.kind != SNAPSHOT for cp in opened) or len(opened) + 1 <= last:
        return []
    return list(opened)
