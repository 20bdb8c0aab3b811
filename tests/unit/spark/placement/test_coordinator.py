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


C0 = "executor_127.0.0.4_2"


def test_each_standby_is_on_another_host_than_its_primary_spread_by_load():
    from blobstate.spark.placement.coordinator import choose_standbys

    primaries = [A0, B0, C0, A0]
    standbys = choose_standbys([A0, B0, C0], primaries)
    assert set(standbys) == {0, 1, 2, 3}
    assert all(host_of(standbys[p]) != host_of(primaries[p]) for p in standbys)
    loads = [sum(e == x for e in [*primaries, *standbys.values()]) for x in (A0, B0, C0)]
    assert max(loads) - min(loads) <= 1, (standbys, loads)  # 8 copies over 3 executors
    # a second executor of the primary's own host is no spare: same disk
    assert choose_standbys([A0, A1], [A0, A1]) == {}
    assert choose_standbys([A0, B0], ["", A0]) == {1: B0}  # an unknown primary gets none


def test_a_standby_that_still_qualifies_is_kept_and_leaving_executors_are_not_chosen():
    from blobstate.spark.placement.coordinator import choose_standbys

    assert choose_standbys([A0, B0, C0], [A0, A0], current={0: C0, 1: C0}) == {0: C0, 1: C0}
    # the current standby is now the primary's host, or leaving, or dead: chosen again
    assert choose_standbys([A0, B0, C0], [C0, A0], current={0: C0, 1: C0}) == {0: B0, 1: C0}
    assert choose_standbys([A0, B0, C0], [A0], current={0: C0}, leaving={C0}) == {0: B0}
    assert choose_standbys([A0, B0], [A0], current={0: C0}) == {0: B0}


def test_a_lost_host_hands_its_partitions_to_their_standbys_before_the_least_loaded():
    placement = Placement(4)
    for p, e in enumerate([A0, B0, A0, C0]):
        placement.record(p, e)
    assert placement.assign_standbys([A0, B0, C0]) == {0: B0, 1: C0, 2: B0, 3: A0}
    placement.standbys = {0: C0, 2: C0}
    # host 127.0.0.2 lost: partitions 0 and 2 go to their standbys, not to the least loaded
    assert placement.choose([B0, C0]) == [C0, B0, C0, C0]
    # without standbys the same loss sends them to the least loaded (partition 0 would land on B0)
    bare = Placement(4)
    for p, e in enumerate([A0, B0, A0, C0]):
        bare.record(p, e)
    assert bare.choose([B0, C0]) == [B0, B0, C0, C0]


def test_a_leaving_holder_hands_its_partitions_on_like_a_lost_one():
    placement = Placement(3)
    for p, e in enumerate([A0, A1, B0]):
        placement.record(p, e)
    # A0 leaves: its host has A1 (same disk) first
    assert placement.choose([A0, A1, B0], leaving={A0}) == [A1, A1, B0]
    placement.standbys = {0: C0, 1: C0}
    # the whole host leaves: the standby, then (no standby) the least loaded not leaving
    assert placement.choose([A0, A1, B0, C0], leaving={A0, A1}) == [C0, C0, B0]
    placement.standbys = {}
    assert placement.choose([A0, A1, B0, C0], leaving={A0, A1}) == [C0, B0, B0]
    # every executor leaving: they are still chosen (a leaving executor runs tasks until it goes)
    assert placement.choose([A0], leaving={A0}) == [A0, A0, A0]


def test_an_executor_spark_is_decommissioning_is_not_live_for_placement(monkeypatch):
    """``SparkPlacement(leaving=...)``: a leaving executor gets no partition (Spark starts no task there), its
    partitions go to their standbys."""
    from types import SimpleNamespace

    from blobstate.spark.placement import coordinator

    class Helper:
        @staticmethod
        def executorLocations(_sc):  # noqa: N802 - the JVM helper's name
            return "executor_a_1\nexecutor_b_2\nexecutor_c_3"

    monkeypatch.setattr(coordinator, "load", lambda sc: Helper)
    sc = SimpleNamespace(_jsc=SimpleNamespace(sc=lambda: None))
    gone = {"executor_a_1"}
    placer = coordinator.SparkPlacement(sc, 2, leaving=lambda _sc: set(gone))
    placer.placement.record(0, "executor_a_1")
    placer.placement.standbys = {0: "executor_c_3"}
    assert placer.leaving() == {"executor_a_1"}
    assert placer.live_executors() == ["executor_b_2", "executor_c_3"]
    assert placer.choose()[0] == "executor_c_3"
    gone.clear()
    assert placer.choose()[0] == "executor_a_1"
