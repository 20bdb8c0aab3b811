"""Deterministic simulation of blobstate's commit protocol (issue 27; FoundationDB's simulator, TigerBeetle's VOPR).

The real pipelines (snapshot, delta and group commits, gc, restore, recover, an offline rescale's Spark-free
path) run as actors under a seeded scheduler, against an in-memory blob store and checkpoint log, on a virtual
clock; faults are injected and the invariants are checked after every step. A failing seed replays exactly and is
shrunk to a short schedule.

Usage::

    from blobstate.testing.simulation import run_seed, shrink
    result = run_seed(7, profile="full")
    if result.failed:
        print(describe(shrink(result)))
"""

from blobstate.testing.simulation.runner import ActorSpec, Result, Scenario, run
from blobstate.testing.simulation.scenarios import PROFILES, scenario
from blobstate.testing.simulation.scheduler import Fault


def run_seed(seed: int, profile: str = "full", *, check_every_step: bool = True) -> Result:
    """Run the scenario of ``seed`` in ``profile`` (``blobstate.testing.simulation.scenarios``)."""
    return run(scenario(seed, profile), check_every_step=check_every_step)


__all__ = ["PROFILES", "ActorSpec", "Fault", "Result", "Scenario", "run", "run_seed", "scenario"]
