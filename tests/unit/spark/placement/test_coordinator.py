"""The driver's choice of where each partition's task runs (``blobstate.spark.placement.coordinator.Placement``): pure
logic."""

from __future__ import annotations

from types import SimpleNamespace

from blobstate.spark.placement.coordinator import Placement, host_of

A0, A1, B0 = "executor_127.0.0.2_0", "executor_127.0.0.2_7", "executor_127.0.0.3_1"


def test_without_holders_the_partitions_spread_over_the_live_executors():
    assert Placement(4).choose([A0, B0]) == [A0, B0, A0, B0]
    assert Placement(3).choose([]) == ["", "", ""]


def test_a_partition_goes_to_its_live_holder_and_the_others_fill_the_least_loaded():
    placement = Placement(4)
    placement.record(0, A0)
    placement.record(1, A0)
    placement.record(2, "")  # unknown: nothing recorded
    assert placement.choose([A0, B0]) == [A0, A0, B0, B0]


def test_a_lost_holder_falls_back_to_another_executor_of_its_host_then_to_any():
    placement = Placement(3)
    for p in range(3):
        placement.record(p, A1 if p < 2 else B0)
    assert placement.choose([A0, B0]) == [A0, A0, B0]  # executor 7 is gone, host 127.0.0.2 has executor 0
    assert placement.choose([B0]) == [B0, B0, B0]  # the host is gone


def test_a_restarted_driver_adopts_the_newest_committed_copy_each_host_reports():
    records = {p: tuple(SimpleNamespace(checkpoint_id=f"p{p}-b{b}", batch_id=b) for b in range(5)) for p in range(3)}
    reports = [(A0, {0: "p0-b4", 1: "p1-b2", 2: "not-committed"}), (B0, {1: "p1-b4", 2: "p2-b1"}), ("", {0: "p0-b4"})]
    placement = Placement(3)
    assert placement.adopt(reports, records) == 3
    assert placement.holders == {0: A0, 1: B0, 2: B0}
    assert host_of(A1) == "127.0.0.2" and host_of("somehost") == "somehost"
