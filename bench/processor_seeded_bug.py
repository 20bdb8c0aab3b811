"""How many seeds profile ``processor`` of the simulator takes to find issue 41's named bug, seeded: the expiry
index written a batch late (``tests/fault/test_simulation.py:defer_expiry_index``).

``python bench/processor_seeded_bug.py bug|clean FIRST_SEED LAST_SEED MAX_FOUND``: runs the seeds in order with the
bug patched in (``bug``) or not (``clean``), prints each seed's steps and violation, and stops after ``MAX_FOUND``
failing seeds.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(mode: str, first: int, last: int, max_found: int) -> None:
    import pytest

    from blobstate.testing.simulation import run_seed
    from tests.fault.test_simulation import defer_expiry_index

    patch = pytest.MonkeyPatch()
    if mode == "bug":
        defer_expiry_index(patch)
    started, steps, found, seed = time.time(), 0, [], first
    try:
        for seed in range(first, last):
            result = run_seed(seed, "processor")
            steps += result.steps
            shown = result.violation and (result.violation.kind, str(result.violation)[:300])
            print(seed, result.steps, shown, flush=True)
            if result.failed:
                found.append(seed)
                if len(found) >= max_found:
                    break
    finally:
        patch.undo()
    print("found", found, "seeds run", seed + 1 - first, "steps", steps, "seconds", round(time.time() - started))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
