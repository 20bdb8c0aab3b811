"""The soak's report: the figures of a finished run of ``bench.soak``, and whether an invariant failed."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.soak import Soak


def build_report(soak: Soak, wall_s: float) -> dict[str, Any]:
    """The figures of a finished soak (printed and written by ``python -m bench.soak``)."""
    attempts = soak.ledger.attempts.values()
    committed = {c.attempt for c in soak.ledger.commits.values()}
    fenced = [a for a in attempts if a.number not in committed and a.returncode == 4]
    orphans = soak.ledger.orphans
    return {
        "target": "s3 (moto)" if soak.cfg.s3 else "file", "heldGc": soak.cfg.held_gc,
        "seed": soak.cfg.seed, "retain": soak.cfg.retain, "ttlBaseMs": soak.ttl,
        "points": soak.stats["kill points"] + soak.stats["pause points"] + soak.stats["jump points"],
        "sigkills": soak.stats["backup killed"] + soak.stats["recover killed"],
        "sigstops": soak.stats["pauses"] + soak.stats["gc stopped before deleting"],
        "clockJumps": soak.stats["clock jumps"],
        "clockJumpedHours": round(soak.jumped_ms / 3_600_000, 2),
        "simulatedHours": round(soak.world.clock.elapsed_hours(), 2),
        "backupAttempts": len(soak.ledger.attempts), "commits": len(soak.ledger.commits),
        "fenced": len(fenced), "aborted": len(soak.ledger.attempts) - len(committed - {None}) - len(fenced),
        "healed": {"writerHeals": soak.stats["writer heals"], "gcExpiredHealed": soak.stats["gc expiredHealed"]},
        "lost": len(soak.ledger.lost), "unrestorable": len(soak.ledger.unrestorable),
        "orphans": len(orphans.get("orphans", [])) + len(orphans.get("leases", [])) +
        len(orphans.get("temporaries", [])),
        "referencesMissing": len(orphans.get("missing", [])),
        "ttlOnReferencedBeforeFinalGc": len(soak.before_gc.get("referencedWithTtl", [])),
        "unexpected": soak.unexpected, "problems": soak.ledger.problems,
        "lostDetail": soak.ledger.lost, "unrestorableDetail": soak.ledger.unrestorable,
        "orphanDetail": {k: v[:20] for k, v in orphans.items()},
        "restoreFailuresBeforeRecovery": soak.restore_failures,
        "listsPerCommit": lists_per_commit(soak.lists),
        "lanes": {lane.kind: {"runs": soak.stats[f"lane {lane.kind} runs"],
                              "commits": soak.stats[f"lane {lane.kind} commits"],
                              "killed": soak.stats[f"lane {lane.kind} killed"],
                              "heals": soak.stats[f"lane {lane.kind} heals"], "latestBatch": lane.known,
                              "failures": lane.failures} for lane in soak.lanes},
        "laneOrphans": soak.lane_orphans,
        "gcSkipped": dict(soak.gc_skips), "counts": dict(sorted(soak.stats.items())),
        "wallSeconds": round(wall_s, 1),
    }


def lists_per_commit(lists: list[dict[str, int]]) -> dict[str, Any]:
    """Mean, median and max listings per committed backup process, in all and by what they walked."""
    kinds = sorted({k for one in lists for k in one})
    return {kind: {"mean": round(statistics.fmean(one.get(kind, 0) for one in lists), 2),
                   "median": statistics.median(one.get(kind, 0) for one in lists),
                   "max": max(one.get(kind, 0) for one in lists)} for kind in kinds}


def failed(report: dict[str, Any]) -> bool:
    return bool(report["lost"] or report["unrestorable"] or report["orphans"] or report["referencesMissing"] or
                report["ttlOnReferencedBeforeFinalGc"] or
                report["unexpected"] or report["problems"] or report["laneOrphans"] or
                any(lane["failures"] for lane in report["lanes"].values()))
