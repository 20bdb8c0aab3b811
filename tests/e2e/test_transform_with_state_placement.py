"""Placement of a stateful processor's partition tasks (classic PySpark, blobstate's JVM helper): the batch's
``mapInArrow`` runs over the repartitioned rows wrapped in ``PlacedRDD``
(``blobstate.spark.stateful.driver.on_partitions.placed_rows``), so each task runs where ``Placement.choose`` put it
and reports its executor, which the driver records (``Placement.record``) as for the partitioned state's own job.
On ``local[2]`` there is one executor (the driver): every task is placed there and reports it. The cluster of two
hosts is ``tests/e2e/test_spark_cluster.py``'s (the flights job; ``BLOBSTATE_CLUSTER_PROCESSOR=1`` runs it with
the running count processor).

Slow: ``python -m pytest -n 0 tests/e2e/test_transform_with_state_placement.py``."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark")

from tests.e2e.test_transform_with_state import our_state  # noqa: E402
from tests.processors import inputs, reference, running_count  # noqa: E402
from tests.processors.reference import Batch, canonical  # noqa: E402
from tests.processors.test_against_spark import (  # noqa: E402
    committed_batches,
    input_stream,
    read_everything,
    run_until,
    write_inputs,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-processors")]


def test_processor_tasks_are_placed_and_report_their_executor(spark_session, tmp_path):
    from blobstate.spark import transform_with_state
    from blobstate.spark.placement import helper_jar
    from blobstate.spark.placement.coordinator import SparkPlacement

    try:
        helper_jar.ensure_jar(pytest.importorskip("pyspark").__version__)
    except helper_jar.HelperUnavailable as exc:
        pytest.skip(f"blobstate's JVM helper is unavailable ({exc}): .ci/install-spark.sh builds it")
    data = inputs.running_count(3)
    source = write_inputs(tmp_path / "in", data)
    outputs: dict[int, list[dict]] = {}

    def sink(df: Any, batch_id: int) -> None:
        outputs[batch_id] = [r.asDict() for r in df.collect()]

    checkpoint = str(tmp_path / "checkpoint")
    query = transform_with_state(
        input_stream(spark_session, source), running_count.RunningCount(), key_cols=["k"],
        output_schema=running_count.OUTPUT, sink=sink, repo=f"file://{tmp_path}/repo",
        checkpoint_location=checkpoint, job="tws", store="running_count", num_partitions=4,
        local_dir=str(tmp_path / "local"))
    try:
        run_until(query, lambda: read_everything(checkpoint, len(data) - 1), "not every file read")
        stats = list(query.state.batch_stats)
    finally:
        query.close()
    assert [s.batch_id for s in stats] == list(range(len(data)))
    live = SparkPlacement(spark_session.sparkContext, 4).live_executors()
    assert len(live) == 1  # local mode: the driver
    for s in stats:  # every task ran where it was placed and said so (on main: no executor, nothing placed)
        assert s.executors == tuple(live) * 4 and s.partitions_placed == 4, s
    expected, counts = reference.running_count([Batch(frame, 0) for frame in data])
    for b in committed_batches(checkpoint):
        assert canonical(outputs[b]) == canonical(expected[b]), b
    assert {dict(r["key"])["k"]: dict(r["value"])["count"] for r in our_state(tmp_path, "running_count", 4)} == counts
