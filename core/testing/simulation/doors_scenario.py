"""Profile ``doors`` (issue 39): what ``full`` runs, plus the doors' actors (``blobstate.testing.simulation.doors``)
drawn from the same seed:

- a driver query (``qd``) and a ``write_state`` with its checkpoint location racing it (``ws``), the query then
  restarted on the store the write made (issue 39 case 4, driver);
- a partitioned query (``qg``) and a rescale with its checkpoint location racing it (``rsq``), the query then
  restarted on the rescaled store (case 4, partitioned);
- an initial state written (``ini``) and two new queries adopting it (``a1``, ``a2``), one of them mostly paused
  early in its open, where the Open door reads, plans and pins (case 5);
- a driver query whose sink fails after blobstate's commit so that Spark re-runs the batch with other data
  (``fq``), and a reader beside it (``rd``, case 6).
"""

from __future__ import annotations

import random

from blobstate.model.records import StoreKey
from blobstate.testing.simulation.runner import ActorSpec
from blobstate.testing.simulation.scheduler import Fault

QD, QD_WRITTEN = StoreKey("sim", "0", "qd"), StoreKey("sim", "0", "qd-written")
QG, QG_RESCALED = StoreKey("sim", "group", "qg"), StoreKey("sim", "group", "qg-rescaled")
GI = StoreKey("sim", "group", "gi")
FQ = StoreKey("sim", "0", "fq")


def doors_part(rng: random.Random, ttl: int) -> tuple[list[ActorSpec], list[Fault]]:
    """The actors and faults profile ``doors`` adds to ``full``'s (see the module docstring)."""

    def every() -> int:
        return rng.randint(ttl // 60, ttl // 6)

    def skew() -> int:
        return rng.randint(-ttl // 5, ttl // 5)

    qd_batches, qd_every = rng.randint(4, 8), every()
    qg_batches, qg_every, m = rng.randint(4, 7), every(), rng.randint(1, 3)
    specs = [
        # the write and the rescale land while the query runs (the restart must refuse them), or once it stopped
        ActorSpec("qd", "driver_query", 0, skew(), dict(key=QD, name="qd", batches=qd_batches, retain=2,
                                                          interval_ms=qd_every, switch_to=QD_WRITTEN,
                                                          switch_after_ms=rng.randint(0, 3 * qd_every),
                                                          more=rng.randint(1, 3))),
        ActorSpec("ws", "state_writer", rng.randint(qd_every, (qd_batches + 1) * qd_every), skew(),
                  dict(query="qd", source=QD, target=QD_WRITTEN, retain=2)),
        ActorSpec("qg", "group_query", 0, skew(), dict(key=QG, name="qg", partitions=2, batches=qg_batches,
                                                         retain=2, interval_ms=qg_every, switch_to=QG_RESCALED,
                                                         switch_after_ms=rng.randint(0, 3 * qg_every),
                                                         to_partitions=m, more=rng.randint(1, 3))),
        ActorSpec("rsq", "engine_rescale", rng.randint(qg_every, (qg_batches + 1) * qg_every), skew(),
                  dict(query="qg", source=QG, target=QG_RESCALED, partitions=m, retain=2)),
        ActorSpec("ini", "initial_writer", 0, skew(), dict(key=GI, name="gi-init", partitions=2, retain=2)),
        ActorSpec("a1", "group_query", rng.randint(1, ttl // 10), skew(),
                  dict(key=GI, name="a1", partitions=2, batches=rng.randint(3, 6), retain=2, interval_ms=every())),
        ActorSpec("a2", "group_query", rng.randint(1, ttl // 4), skew(),
                  dict(key=GI, name="a2", partitions=2, batches=rng.randint(3, 6), retain=2, interval_ms=every())),
        ActorSpec("fq", "driver_query", 0, skew(), dict(key=FQ, name="fq", batches=rng.randint(5, 9), retain=2,
                                                          interval_ms=every(), rerun=0.3)),
        ActorSpec("rd", "reader", rng.randint(ttl // 20, ttl // 2), skew(),
                  dict(query="fq", key=FQ, reads=rng.randint(2, 5), gap_ms=every())),
    ]
    faults = []
    if rng.random() < 0.7:  # an adopter paused early in its open (its repository, its view, its pin)
        faults.append(Fault("pause", rng.choice(["a1", "a2"]), rng.randint(1, 12), ms=rng.randint(ttl // 20, ttl)))
    for _ in range(rng.randint(0, 2)):  # any of the others paused, or killed (its work directory kept or lost)
        who = rng.choice(["qd", "ws", "qg", "rsq", "fq", "a1", "a2"])
        if rng.random() < 0.7:
            faults.append(Fault("pause", who, rng.randint(1, 80), ms=rng.randint(10, 2 * ttl)))
        else:
            faults.append(Fault("kill", who, rng.randint(1, 80), keep=rng.random() < 0.6))
    return specs, faults


__all__ = ["doors_part"]
