"""Hearing a decommission (``blobstate.spark.placement.decommission``): the helper's answer parsed, each leaving
executor announced once, the watcher's thread, and where a leaving primary's partitions go: pure logic (Spark's side
is tested on a real cluster, tests/e2e/test_spark_decommission.py)."""

from __future__ import annotations

import threading

import pytest

from blobstate.spark.placement.decommission import DecommissionWatcher, hand_over, newly_leaving, parse_locations

A0, A1 = "executor_127.0.0.2_0", "executor_127.0.0.2_7"  # two executors of host 127.0.0.2
B0, C0 = "executor_127.0.0.3_1", "executor_127.0.0.4_2"
WAIT_S = 30.0


def test_the_helpers_answer_is_a_set_of_locations():
    assert parse_locations("") == frozenset()
    assert parse_locations(f"{A0}\n{B0}\n") == {A0, B0}
    assert parse_locations(f"\n {A0} \n\n") == {A0}


def test_an_executor_is_new_once_even_after_it_is_gone():
    new, seen = newly_leaving(frozenset(), frozenset({B0, A0}))
    assert new == [A0, B0] and seen == {A0, B0}
    new, seen = newly_leaving(seen, frozenset({B0}))
    assert new == [] and seen == {A0, B0}
    new, seen = newly_leaving(seen, frozenset())  # both gone
    assert new == [] and seen == {A0, B0}
    new, seen = newly_leaving(seen, frozenset({C0, A0}))
    assert new == [C0] and seen == {A0, B0, C0}


def test_poll_once_calls_back_once_per_newly_leaving_executor_and_survives_failures():
    answers = iter([frozenset(), frozenset({A0}), RuntimeError("gateway hiccup"), frozenset({A0, B0}),
                    frozenset({B0})])
    heard: list[str] = []

    def poll():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def on_leaving(executor):
        heard.append(executor)
        if executor == B0:
            raise ValueError("the hand-over failed")  # logged; the watcher goes on

    watcher = DecommissionWatcher(poll, on_leaving)
    assert [watcher.poll_once() for _ in range(5)] == [[], [A0], [], [B0], []]
    assert heard == [A0, B0]


def test_the_watcher_thread_calls_back_and_stops():
    leaving = [frozenset()]
    polled = threading.Event()
    heard: list[str] = []
    called = threading.Event()

    def poll():
        polled.set()
        return leaving[0]

    def on_leaving(executor):
        heard.append(executor)
        called.set()

    with DecommissionWatcher(poll, on_leaving, interval_s=0.01) as watcher:
        assert polled.wait(WAIT_S)
        leaving[0] = frozenset({B0})
        assert called.wait(WAIT_S)
        assert watcher._thread.daemon
    assert not watcher._thread.is_alive()
    assert heard == [B0]  # polled many times, announced once


def test_the_interval_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        DecommissionWatcher(frozenset, print, interval_s=0)


def test_a_leaving_primary_goes_to_its_live_standby():
    holders = {0: A0, 1: B0, 2: C0}
    assert hand_over({A0}, holders, {0: B0, 1: C0}, [A0, B0, C0]) == {0: B0}


def test_without_a_usable_standby_it_goes_to_the_least_loaded_executor_on_another_host():
    holders = {0: A0, 1: A0, 2: B0, 3: B0, 4: C0}
    # partition 0's standby is leaving too, partition 1's is dead: both go to the least loaded that stays
    moves = hand_over({A0, C0}, holders, {0: C0, 1: "executor_127.0.0.9_5"}, [A0, A1, B0, C0])
    # A1 is on A0's host: B0 is the only executor of another host that stays
    assert moves == {0: B0, 1: B0, 4: A1}


def test_the_least_loaded_counts_the_moves_already_chosen_and_ties_go_by_location():
    d0 = "executor_127.0.0.5_3"
    holders = {0: A0, 1: A0, 2: A0, 3: C0}
    assert hand_over({A0}, holders, {}, [A0, B0, C0, d0]) == {0: B0, 1: d0, 2: B0}


def test_when_only_its_own_host_stays_it_goes_there_and_with_nothing_left_it_is_left_out():
    assert hand_over({A0}, {0: A0}, {}, [A0, A1]) == {0: A1}
    assert hand_over({A0, B0}, {0: A0, 1: B0, 2: A0}, {0: B0}, [A0, B0]) == {}


def test_partitions_whose_primary_stays_are_not_moved():
    assert hand_over(set(), {0: A0, 1: B0}, {0: B0}, [A0, B0]) == {}
    assert hand_over({C0}, {0: A0, 1: B0}, {}, [A0, B0, C0]) == {}


def test_the_driver_listens_for_decommissions_only_with_sparks_switch_on():
    from types import SimpleNamespace

    from blobstate.spark.placement.decommission import enabled

    def sc(conf):
        return SimpleNamespace(getConf=lambda: SimpleNamespace(get=lambda k, d=None: conf.get(k, d)))

    assert enabled(sc({"spark.decommission.enabled": "true"}))
    assert enabled(sc({"spark.decommission.enabled": " TRUE "}))
    assert not enabled(sc({"spark.decommission.enabled": "false"}))
    assert not enabled(sc({}))
