"""The short version of the never-lose soak (bench/soak.py, issue 12): two writers on two work directories and a gc
host on a third, real ``blobstate`` processes SIGKILLed and SIGSTOPped at random journal events, clock jumps of up to
two TTLs, gc runs during pauses and gc stopped between its decision and its deletes; then no lost commit, every
retained checkpoint verified and restored to exactly the data its commit held, and no orphan after the final gc;
beside them a delta writer and a group owner (bench/soak_lanes.py), killed and paused as well.

The long run is ``python -m bench.soak --points 1000 --seed N --hours H`` (bench/README.md, "Soak")."""

from __future__ import annotations

import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from bench.soak import Config, run_soak  # noqa: E402
from bench.soak_report import failed  # noqa: E402

POINTS = 26


@pytest.mark.slow
def test_soak_short_loses_nothing_and_leaves_no_orphan(tmp_path):
    report = run_soak(Config(points=POINTS, seed=1, hours=2.0, check_every=13, lane_rate=0.25), tmp_path)
    detail = json.dumps({k: v for k, v in report.items() if k != "counts"}, indent=1)[:6000]
    # it really ran its faults: kills, pauses, jumps, commits, fencing, checks
    assert report["points"] == POINTS
    assert report["sigkills"] >= 5 and report["sigstops"] >= 5 and report["clockJumps"] >= 5, detail
    assert report["commits"] >= 10 and report["counts"]["checks"] >= 2, detail
    # beside the snapshot writers, a delta writer and a group owner (issue 27), killed and paused too
    lanes = report["lanes"].values()
    assert all(lane["runs"] >= 1 for lane in lanes) and sum(lane["commits"] for lane in lanes) >= 3, detail
    assert sum(lane["killed"] for lane in lanes) + report["counts"].get("lane pauses", 0) >= 1, detail
    assert report["laneOrphans"] == {} and all(not lane["failures"] for lane in report["lanes"].values()), detail
    assert report["simulatedHours"] >= 1.0, detail
    # and nothing was lost
    assert report["lost"] == 0, detail
    assert report["unrestorable"] == 0, detail
    assert report["orphans"] == 0 and report["referencesMissing"] == 0, detail
    assert report["ttlOnReferencedBeforeFinalGc"] == 0, detail
    assert report["unexpected"] == [] and report["problems"] == [], detail
    assert not failed(report)
