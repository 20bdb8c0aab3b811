"""A Spark query restarts exactly from a copied repository (``blobstate copy``): the flights query runs four
micro-batches against one repository (snapshots held after batch 1, so its state is a snapshot plus deltas), its
host's state and work dirs are lost, the repository is copied into another one, and the query restarts on the
copy with its own Spark checkpoint location: blobstate restores the snapshot and the deltas up to batch 3 from the
copy (the copied records keep their query, lineage and batch ids), Spark goes on with batch 4, and the final
state equals the reference computed from the flights themselves. One real local Spark session."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from spark_fixtures import first_days, restored_state, run_first_days_then_lose_the_host  # noqa: E402

from blobstate import api  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.spark import register  # noqa: E402
from blobstate.spark.demo.flights import flights_schema, reference_state, update_state  # noqa: E402

KEY = StoreKey("flights", "0", "stats")


def _stream(spark, directory):
    return (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
            .csv(directory))


def test_a_spark_query_restarts_exactly_from_a_copied_repository(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    source, copy = f"file://{tmp_path}/repo", f"file://{tmp_path}/copy"
    paths = {"checkpoint_location": str(tmp_path / "spark-ck"), "state_dir": str(tmp_path / "state"),
             "work_dir": str(tmp_path / "work")}
    binding = register(spark_session, key=KEY, repo=source, **paths)
    partial = str(tmp_path / "partial")
    run_first_days_then_lose_the_host(spark_session, binding, directory, partial, paths, days=4, pause_at=2,
                                      total=5)

    (report,) = api.copy(source=source, target=copy, work_base=str(tmp_path / "copy-work"))
    copied = api.list_checkpoints(repo=copy, key=KEY)
    original = api.list_checkpoints(repo=source, key=KEY)
    assert [(c.checkpoint_id, c.batch_id, c.kind, c.query_id, c.lineage_id) for c in copied] == \
        [(c.checkpoint_id, c.batch_id, c.kind, c.query_id, c.lineage_id) for c in original]
    assert report.copied and any(c.is_delta for c in copied)

    second = register(spark_session, key=KEY, repo=copy, **paths)
    second.start(_stream(spark_session, partial).writeStream, update_state).processAllAvailable()
    second.close()
    assert second.plan.last_committed == 3 and second.plan.restored_batch == 3
    assert second.plan.snapshot_batch <= 1 and second.plan.deltas == 3 - second.plan.snapshot_batch
    assert [s.batch_id for s in second.batch_stats] == [4]
    assert restored_state(tmp_path, copy, KEY) == reference_state(first_days(directory, frame, 5))
