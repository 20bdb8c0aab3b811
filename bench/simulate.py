"""The long run of the deterministic simulator (issue 27): seeds until ``--steps`` scheduled steps have run.

``python -m bench.simulate --steps 1000000 --seed-start N [--profile full|safe|two-logs|unpinned|rescale|standby|...]
[--shrink-seconds S] [--max-failures K] [--out FILE] [--seeded-bug NAME]``

Each seed is a scenario of ``blobstate.testing.simulation`` (actors running the real snapshot, delta and group
commits, gc, restore and recover under a seeded scheduler, with faults; profile ``rescale`` adds an offline
rescale), checked after every step. The report (stdout, and JSON with ``--out``) gives the seeds run, the scheduled
steps, steps per second, and every failing seed with its violation, its classification (issue 27's case 1, 2, 3,
10, 11, rescale, or other), the seeds it took to find each case, and the shortest schedule found for the first
failure of each kind (``shrink``). A seed replays exactly with ``--seed-start SEED --seeds 1``: set
``PYTHONHASHSEED`` (this command sets it to 0 when unset and runs itself again), since the order in which the
protocol walks a set of ids follows the interpreter's hash seed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any

from blobstate.testing.simulation import PROFILES, regrouper, run_seed, standby
from blobstate.testing.simulation.shrink import classify, describe, last_call, shrink


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simulate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000, help="scheduled steps to run (default 1,000,000)")
    parser.add_argument("--seed-start", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=None, help="at most this many seeds")
    parser.add_argument("--profile", choices=PROFILES, default="full")
    parser.add_argument("--shrink-seconds", type=float, default=120.0, help="shrink budget per failure kind")
    parser.add_argument("--max-failures", type=int, default=1000, help="stop after this many failing seeds")
    parser.add_argument("--out", help="write the report as JSON here")
    parser.add_argument("--seeded-bug", action="append", default=[], choices=(regrouper.SEEDED_BUG, standby.SEEDED_BUG),
                        help="switch a seeded bug on (SELF-CHECK: the run must find it)")
    args = parser.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") is None:  # exact replay across processes needs a fixed hash seed
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "bench.simulate", *(argv or sys.argv[1:])])
    for module in (regrouper, standby):  # each seeded bug is switched on in the module that holds it
        module.BUGS.update(b for b in args.seeded_bug if b == module.SEEDED_BUG)
    logging.disable(logging.WARNING)  # the protocol warns about every fault it survives
    t0 = time.perf_counter()
    steps = seeds = 0
    failures: list[dict[str, Any]] = []
    first_by_case: dict[str, int] = {}
    shrunk: dict[str, str] = {}
    seed = args.seed_start
    while steps < args.steps and (args.seeds is None or seeds < args.seeds) and len(failures) < args.max_failures:
        result = run_seed(seed, args.profile)
        seeds += 1
        steps += result.steps
        if result.failed:
            case = classify(result)
            assert result.violation is not None
            failures.append({"seed": seed, "case": case, "kind": result.violation.kind, "steps": result.steps,
                             "lastCall": last_call(result), "violation": str(result.violation)[:600]})
            print(f"seed {seed}: {case}: {str(result.violation)[:300]}", flush=True)
            if case not in first_by_case:
                first_by_case[case] = seeds
                pause = time.perf_counter()
                small = shrink(result, seconds=args.shrink_seconds)
                t0 += time.perf_counter() - pause  # shrinking is not counted in the steps per second
                shrunk[case] = describe(small)
                print(f"shortest schedule found for {case} (seed {seed}, {result.steps} -> {small.steps} steps):\n"
                      f"{shrunk[case]}", flush=True)
        seed += 1
    elapsed = time.perf_counter() - t0
    report = {"profile": args.profile, "seedStart": args.seed_start, "seeds": seeds, "steps": steps,
              "seconds": round(elapsed, 1), "stepsPerSecond": round(steps / elapsed, 1) if elapsed else 0.0,
              "failures": failures, "seedsToFind": first_by_case, "shrunk": shrunk,
              "pythonHashSeed": os.environ.get("PYTHONHASHSEED"), "seededBugs": sorted(regrouper.BUGS | standby.BUGS)}
    print(f"profile {args.profile}: {seeds} seeds from {args.seed_start}, {steps} scheduled steps in "
          f"{elapsed:.0f} s ({report['stepsPerSecond']} steps/s), {len(failures)} failing seeds")
    for case, n in sorted(first_by_case.items()):
        print(f"  {case}: first found after {n} seeds; seeds: "
              f"{[f['seed'] for f in failures if f['case'] == case][:20]}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
