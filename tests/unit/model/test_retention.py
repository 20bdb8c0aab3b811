"""Retention policies (``blobstate.model.retention``): each rule keeps exactly what restic's ``forget`` keeps for
the same times (the table: restic's own golden files, ``restic_policy_table.json``), and what a policy keeps of a
log never restores anything else than the full log did (the chain rule, runs, groups)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstate.errors import ConfigurationError, NothingToRestore
from blobstate.model import chain
from blobstate.model.records import DELTA, Checkpoint, PartitionEntry, StoreKey
from blobstate.model.retention import RetentionPolicy, Span, apply_policy, plan_retention, read_ahead

TABLE = json.loads((Path(__file__).parent / "restic_policy_table.json").read_text())
KEY = StoreKey("j", "0", "s")
DAY = 86_400_000


def _restic_reason(text: str) -> str:
    """restic's match text in ours: ``daily snapshot`` -> ``daily``, ``within 2d`` -> ``within``."""
    text = text.removesuffix(" snapshot")
    return "within" if text.startswith("within") else text


@pytest.mark.parametrize("case", TABLE["cases"], ids=lambda c: f"restic-{c['case']}-{c['policy']}")
def test_each_rule_keeps_exactly_what_restic_forget_keeps(case):
    times = TABLE["timesMs"]
    if not case["policy"]:  # restic keeps nothing for an empty policy; its CLI and ours refuse one
        with pytest.raises(ConfigurationError):
            RetentionPolicy()
        return
    why = apply_policy(times, RetentionPolicy(**case["policy"]))
    kept = {i: [_restic_reason(r) for r in w] for i, w in enumerate(why) if w}
    expected = {i: [_restic_reason(r) for r in matches] for i, matches in case["keep"]}
    assert kept == expected


def test_the_table_covers_every_rule_and_restics_oldest_bucket():
    rules = {name for case in TABLE["cases"] for name in case["policy"]}
    assert rules == {"last", "hourly", "daily", "weekly", "monthly", "yearly", "within"}
    assert any(r.startswith("oldest") for c in TABLE["cases"] for _, m in c["keep"] for r in m)


def test_keep_within_subtracts_calendar_months_and_refuses_a_bare_m():
    assert Span.parse("1mo14d").text == "1mo14d"
    with pytest.raises(ConfigurationError, match="ambiguous"):
        Span.parse("1m")
    with pytest.raises(ConfigurationError):
        RetentionPolicy(daily=0, last=0)
    assert RetentionPolicy.parse("last=3,within=2d,daily=7") == RetentionPolicy(last=3, within="2d", daily=7)
    assert RetentionPolicy.parse(RetentionPolicy(weekly=-1, within="90min").text()).weekly == -1


def snap(gen: int, batch: int | None, t: int = 0, run: str = "q") -> Checkpoint:
    return Checkpoint(KEY, f"s{gen}", gen, f"{KEY.prefix}/indexes/{gen:032x}.json", 1, 10, t or gen * DAY, batch,
                      query_id=run)


def delta(gen: int, batch: int, run: str = "q") -> Checkpoint:
    return Checkpoint(KEY, f"d{gen}", gen, "", 0, 0, gen * DAY, batch, kind=DELTA,
                      changelog_blob_id=f"{KEY.prefix}/blobs/{gen:032x}", changelog_crc32c=7, changelog_size=5,
                      query_id=run)


def ids(records):
    return [cp.checkpoint_id for cp in records]


def test_keep_last_is_retain_exactly():
    history = [delta(1, 0), snap(2, 0), delta(3, 1), delta(4, 2), snap(5, 2), delta(6, 3), snap(7, 3), delta(8, 4)]
    for n in (1, 2, 3, 5):
        plan = plan_retention(history, RetentionPolicy(last=n))
        assert (plan.expiring, plan.retained) == chain.retention(history, n)


def test_retention_reads_ahead_only_when_the_next_snapshot_makes_a_count_policy_drop_one():
    """``read_ahead``: what a committer reads beside the previous index, so that retention after its commit reads
    nothing: every record once the next snapshot exceeds ``--retain N``, nothing before, with deltas, or with a
    calendar policy (it cannot tell cheaply what those will read)."""
    log = [snap(g, None) for g in (1, 2, 3)]
    last3 = RetentionPolicy(last=3)
    assert read_ahead(log, last3) == log and read_ahead(log[:2], last3) == []
    assert read_ahead(None, last3) == [] and read_ahead([], last3) == []
    assert read_ahead([*log, delta(4, 7)], last3) == []
    assert read_ahead(log, RetentionPolicy(last=3, daily=7)) == []


def test_a_daily_snapshot_stands_alone_and_the_latest_state_keeps_its_deltas():
    # one snapshot a day (batches 0, 2, 4, ...) with a delta for every batch: keep 2 daily + the latest chain
    history = []
    gen = 0
    for day in range(6):
        for b in (2 * day, 2 * day + 1):
            gen += 1
            history.append(delta(gen, b))
        gen += 1
        history.append(snap(gen, 2 * day + 1))
    gen += 1
    history.append(delta(gen, 12))
    plan = plan_retention(history, RetentionPolicy(daily=3))
    kept_snaps = [cp for cp in plan.retained if not cp.is_delta]
    assert [cp.batch_id for cp in kept_snaps] == [7, 9, 11]
    assert [cp.batch_id for cp in plan.retained if cp.is_delta] == [12]  # only the latest state's chain
    assert ids(chain.plan_chain(plan.retained).records) == ids(chain.plan_chain(history).records)
    assert plan.why(kept_snaps[0]) == ("daily",) and plan.why(plan.retained[-1]) == ("needed by the chain",)
    # with last=2 beside it, every batch after the older of the last two restores
    plan = plan_retention(history, RetentionPolicy(daily=3, last=2))
    assert [cp.batch_id for cp in plan.retained if cp.is_delta] == [10, 11, 12]


def test_interleaved_runs_fall_back_to_the_prefix_form():
    # a re-run delta of batch 1 after the snapshot of batch 1 invalidates it: dropping the re-run would revive it
    history = [snap(1, 0), delta(2, 1), snap(3, 1), delta(4, 1), delta(5, 2), snap(6, 2), delta(7, 3)]
    plan = plan_retention(history, RetentionPolicy(yearly=1, daily=1))
    assert not ({"s3"} & set(ids(s for s in chain.valid_snapshots(plan.retained))))


def group(gen: int, batch: int, snapshot_parts: tuple[int, ...] = (), t: int = 0) -> Checkpoint:
    parts = []
    for p in (0, 1):
        parts.append(PartitionEntry(p, DELTA, f"g{gen}p{p}d", batch, f"{KEY.prefix}/blobs/{gen:030x}{p:02x}", 1, 5))
        if p in snapshot_parts:
            parts.append(PartitionEntry(p, "snapshot", f"g{gen}p{p}s", batch,
                                        f"{KEY.prefix}/indexes/{gen:030x}{p:02x}.json", 1, 5))
    return Checkpoint(KEY, f"g{gen}", gen, "", 0, 0, t or gen * DAY, batch, kind="group", num_partitions=2,
                      partitions=tuple(parts), query_id="q")


def test_a_group_record_is_kept_whole_when_any_partition_needs_it():
    history = [group(1, 0, (0, 1)), group(2, 1), group(3, 2, (0,)), group(4, 3), group(5, 4, (1,)), group(6, 5)]
    plan = plan_retention(history, RetentionPolicy(daily=1))
    for p in (0, 1):
        assert ids(chain.plan_chain(chain.partition_history(plan.retained, p)).records) == \
            ids(chain.plan_chain(chain.partition_history(history, p)).records)
    assert plan.retained[-1].checkpoint_id == "g6"


@st.composite
def histories(draw):
    """Logs of snapshots and deltas of up to two runs, with re-runs, a day apart."""
    out: list[Checkpoint] = []
    batch = 0
    run = "q"
    for gen in range(1, draw(st.integers(2, 24)) + 1):
        kind = draw(st.sampled_from(["delta", "delta", "snap", "rerun", "reset"]))
        if kind == "reset":
            run, batch = run + "x", 0
            kind = "delta"
        if kind == "snap" and batch > 0:
            out.append(snap(gen, batch - 1, run=run))
        elif kind == "rerun" and batch > 1:
            out.append(delta(gen, batch - 2, run=run))
        else:
            out.append(delta(gen, batch, run=run))
            batch += 1
    return out


POLICIES = st.builds(RetentionPolicy, last=st.sampled_from([0, 1, 2]), daily=st.sampled_from([0, 1, 3]),
                     weekly=st.sampled_from([0, 1]), within=st.sampled_from(["", "2d"])).filter(
    lambda p: p is not None)


@settings(max_examples=300, deadline=None)
@given(histories(), st.sampled_from([RetentionPolicy(daily=2), RetentionPolicy(weekly=1, last=1),
                                     RetentionPolicy(within="2d"), RetentionPolicy(daily=1, monthly=1)]))
def test_what_a_policy_keeps_restores_exactly_what_the_full_log_restored(history, policy):
    plan = plan_retention(history, policy)
    assert plan.retained[-1] is history[-1]  # the newest record: the log's generation
    assert {cp.checkpoint_id for cp in plan.retained} | {cp.checkpoint_id for cp in plan.expiring} == \
        {cp.checkpoint_id for cp in history}
    try:
        before = ids(chain.plan_chain(history).records)
    except NothingToRestore:
        return
    assert ids(chain.plan_chain(plan.retained).records) == before  # a Spark restart restores the same state
    valid = set(ids(chain.valid_snapshots(history)))
    for s in chain.valid_snapshots(plan.retained):  # every snapshot kept restores what it restored before
        assert s.checkpoint_id in valid
        assert ids(chain.plan_chain(plan.retained, s.batch_id).records) == \
            ids(chain.plan_chain(history, s.batch_id).records)


def test_a_log_that_cannot_forget_keeps_the_records_inside_it_with_their_reasons():
    history = [snap(g, None, t=g * DAY) for g in range(1, 7)]
    plan = plan_retention(history, RetentionPolicy(daily=1, yearly=2))
    assert ids(plan.retained) == ["s1", "s6"]  # the newest, and the oldest (a yearly count is left)
    expiring, retained = plan.carried_out(can_forget=False)
    assert ids(expiring) == [] and ids(retained) == ids(history)
    assert plan.why(history[2]) == ("kept: the checkpoint log cannot drop a record inside it",)
    assert plan_retention(history, RetentionPolicy(daily=1, yearly=2)).carried_out(True)[0] == history[1:5]
