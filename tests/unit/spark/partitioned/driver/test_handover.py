"""``HandOvers`` (``spark/partitioned/driver/handover.py``): a decommissioning executor's partitions warmed where
``hand_over`` sends them and recorded as their holders only when the copy reached the committed batch there. A
stand-in for ``SparkPlacement`` (the real ``Placement`` inside) and for the warm job; no Spark."""

from __future__ import annotations

from dataclasses import dataclass, field

from blobstate.spark.partitioned.driver.handover import HandOvers
from blobstate.spark.partitioned.executor.warm_task import WarmResult
from blobstate.spark.placement.coordinator import Placement

A1, A2, B1, C1 = "executor_a_1", "executor_a_2", "executor_b_3", "executor_c_4"


@dataclass
class Placer:
    placement: Placement
    live: list[str]
    gone: frozenset[str] = frozenset()
    sc: object = None

    def leaving(self) -> frozenset[str]:
        return self.gone

    def live_executors(self) -> list[str]:
        return [e for e in self.live if e not in self.gone]


@dataclass
class Plan:
    upto: int


@dataclass
class Job:
    """The warm job: each target reaches ``reach`` (a partition -> batch override), or raises ``fail``."""

    reach: dict[int, int | None] = field(default_factory=dict)
    fail: Exception | None = None
    calls: list[tuple[int, tuple[tuple[int, str], ...]]] = field(default_factory=list)

    def __call__(self, plan, targets):
        self.calls.append((plan.upto, targets))
        if self.fail is not None:
            raise self.fail
        return [WarmResult(p, e, self.reach.get(p, plan.upto), f"c{p}") for p, e in targets]


def placer_with(holders, standbys, gone):
    placement = Placement(4)
    for p, e in holders.items():
        placement.record(p, e)
    placement.standbys = dict(standbys)
    return Placer(placement, [A1, A2, B1, C1], frozenset(gone))


def test_a_leaving_executor_s_partitions_go_to_their_standbys_and_become_their_holders():
    placer = placer_with({0: A1, 1: B1, 2: A1, 3: C1}, {0: B1, 2: C1}, {A1})
    job = Job()
    moved = HandOvers(placer, lambda: Plan(7), job).on_leaving(A1)
    assert moved == {0: B1, 2: C1}
    assert job.calls == [(7, ((0, B1), (2, C1)))]
    assert placer.placement.holders == {0: B1, 1: B1, 2: C1, 3: C1}
    assert placer.placement.choose(placer.live_executors())[:3] == [B1, B1, C1]


def test_a_copy_that_did_not_reach_the_committed_batch_or_ran_elsewhere_is_not_made_the_holder():
    placer = placer_with({0: A1, 2: A1}, {0: B1, 2: C1}, {A1})
    job = Job(reach={0: 6})  # partition 0's copy one batch behind (a batch committed meanwhile)
    handovers = HandOvers(placer, lambda: Plan(7), job)
    assert handovers.on_leaving(A1) == {2: C1}
    assert placer.placement.holders[0] == A1  # left to the next batch's choice, which avoids A1 anyway
    assert handovers.snapshot()["done"] == [(A1, {2: C1})]


def test_before_the_first_batch_or_when_the_job_fails_nothing_moves_and_the_executor_is_still_heard():
    placer = placer_with({0: A1}, {0: B1}, {A1})
    job = Job()
    first = HandOvers(placer, lambda: None, job)
    assert first.on_leaving(A1) == {} and job.calls == []
    failing = HandOvers(placer, lambda: Plan(3), Job(fail=RuntimeError("executor lost")))
    assert failing.on_leaving(A1) == {}
    assert placer.placement.holders == {0: A1}
    assert failing.snapshot()["heard"] == [A1] and failing.snapshot()["done"] == [(A1, {})]


def test_an_executor_holding_nothing_runs_no_job():
    placer = placer_with({0: B1}, {0: C1}, {A2})
    job = Job()
    assert HandOvers(placer, lambda: Plan(1), job).on_leaving(A2) == {} and job.calls == []
