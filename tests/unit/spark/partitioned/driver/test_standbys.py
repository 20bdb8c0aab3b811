"""The driver's record of where each partition's standby is (``blobstate.spark.partitioned.driver.standbys``): pure
parts, and the background job's bookkeeping with a stand-in for the Spark job."""

from __future__ import annotations

import threading

import pytest

from blobstate.errors import ConfigurationError
from blobstate.model.records import Replica
from blobstate.spark.partitioned.driver.standbys import (
    StandbyAt,
    WarmStandbys,
    record_reports,
    replicas,
    standby_flag,
)
from blobstate.spark.partitioned.executor.warm_task import WarmResult
from blobstate.spark.placement.coordinator import Placement

A0, B0, C0 = "executor_127.0.0.2_0", "executor_127.0.0.3_1", "executor_127.0.0.4_2"


def test_a_report_counts_when_done_off_the_primarys_host_and_never_goes_back():
    at = record_reports({}, [WarmResult(0, B0, 4, "c4"), WarmResult(1, A0, 4, "c4"),  # 1: on its primary's host
                             WarmResult(2, C0, None, skipped="the partition stayed busy"), WarmResult(3, "", 4)],
                        {0: A0, 1: A0, 2: A0})
    assert at == {0: StandbyAt(B0, 4, "c4")}
    at = record_reports(at, [WarmResult(0, B0, 3, "c3")], {0: A0})  # a late, older report
    assert at[0] == StandbyAt(B0, 4, "c4")
    at = record_reports(at, [WarmResult(0, C0, 2, "c2")], {0: A0})  # moved to another executor: its own batch
    assert at[0] == StandbyAt(C0, 2, "c2")


def test_a_record_names_each_primary_and_the_batch_of_the_standby_chosen_now():
    at = {0: StandbyAt(B0, 4, "c4"), 1: StandbyAt(C0, 3, "c3")}
    assert replicas([A0, A0, B0], {0: B0, 1: B0, 2: B0}, at) == (  # 1's new standby: not warm yet
        Replica(0, A0, B0, 4), Replica(1, A0, B0, None), Replica(2, B0, "", None))  # 2's was just promoted


def test_one_warm_job_at_a_time_and_its_reports_are_recorded():
    placement = Placement(2)
    placement.record(0, A0)
    placement.record(1, B0)
    release, calls = threading.Event(), []

    def job(plan, targets):  # noqa: ANN001, ANN202 - run_warm_job's shape
        calls.append((plan, targets))
        release.wait(30)
        return [WarmResult(p, e, plan, f"c{plan}") for p, e in targets]

    warm = WarmStandbys(job)
    assert warm.request(placement, lambda: [A0, B0], lambda: 7, 7)
    assert not warm.request(placement, lambda: [A0, B0], lambda: 8, 8)  # one in flight: 8 waits...
    assert not warm.request(placement, lambda: [A0, B0], lambda: 9, 9)  # ...replaced by 9
    release.set()
    assert warm.wait(30)
    assert calls == [(7, ((0, B0), (1, A0))), (9, ((0, B0), (1, A0)))] and warm.requested == [7, 9]
    assert warm.replicas([A0, B0], placement) == (Replica(0, A0, B0, 9), Replica(1, B0, A0, 9))
    assert WarmStandbys(job).request(Placement(2), lambda: [A0], lambda: 9, 9)  # no holder: nothing to warm


def test_standby_is_zero_or_one():
    assert standby_flag(0) == 0 and standby_flag(1) == 1 and standby_flag(True) == 1
    with pytest.raises(ConfigurationError, match="standby=2"):
        standby_flag(2)
