"""``blobstate demo``'s progress lines (``spark/demo/run.py``: ``_Progress``), read from a run's ``.batches.jsonl``:
a line every ``--progress-every`` committed batches, and the status said while a run is silent. The e2e demo run
(``tests/e2e/test_demo_progress.py``) uses the default interval; this is where the interval itself is checked."""

from __future__ import annotations

import json

from blobstate.spark.demo.phases import PhaseReporter
from blobstate.spark.demo.run import _Progress


def _commit(out, run: str, batch: int, delta_ms: float) -> None:
    with open(out / f"{run}.batches.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"batch": batch, "deltaMs": delta_ms}) + "\n")


def test_a_line_every_n_committed_batches_with_the_p50_of_those_batches(tmp_path):
    said: list[str] = []
    progress = _Progress(PhaseReporter(said.append), str(tmp_path), total=6, every=2)
    progress("run1")  # no file yet: nothing said
    assert said == []
    seen = []
    for batch, ms in enumerate([5.0, 7.0, 9.0, 11.0, 13.0, 15.0]):
        _commit(tmp_path, "run1", batch, ms)
        progress("run1")
        progress("run1")  # asked again before the next commit: not said twice
        seen.append(len(said))
    assert said[0].startswith("run1: batch 0 of 6 committed")
    assert [line.split(" committed")[0] for line in said] == [
        "run1: batch 0 of 6", "run1: batch 2 of 6", "run1: batch 4 of 6"]
    assert seen == [1, 1, 2, 2, 3, 3]
    assert "commit p50 11.0 ms over the last 2" in said[2]  # batches 3 and 4


def test_the_status_names_the_newest_committed_batch_or_a_starting_driver(tmp_path):
    progress = _Progress(PhaseReporter(lambda _: None), str(tmp_path), total=6, every=25)
    assert progress.status("run2", "the kill").startswith("run2: the Spark driver is starting")
    _commit(tmp_path, "run2", 0, 1.0)
    _commit(tmp_path, "run2", 1, 1.0)
    progress("run2")
    assert progress.status("run2", "the kill") == "run2: batch 1 of 6 committed, waiting for the kill"
