"""``transform_with_state`` on a key-grouped store is refused at start (issue 42), exit 2, naming why, before
anything runs or is written: the processor's operator routes rows by ``pmod(hash, N)`` and stores its variables'
keys without a key-group prefix, so a key-grouped store would hold keys where a rescale at restart cuts them away.
Asked with ``key_groups=``, and a store that records key groups opened without it, both refused."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from tests.processors import running_count  # noqa: E402
from tests.processors.test_against_spark import input_stream  # noqa: E402


def _where(tmp_path, sink):
    return dict(key_cols=["k"], output_schema=running_count.OUTPUT, sink=sink, repo=f"file://{tmp_path}/repo",
                checkpoint_location=str(tmp_path / "checkpoint"), job="tws", store="counts", num_partitions=2,
                local_dir=str(tmp_path / "local"))


def _source(tmp_path):
    from tests.processors import inputs
    from tests.processors.test_against_spark import write_inputs

    return write_inputs(tmp_path / "in", inputs.running_count(1))


def test_transform_with_state_asked_for_key_groups_is_refused_at_start(spark_session, tmp_path):
    from blobstate.spark import transform_with_state
    from blobstate.spark.errors import KeyGroupsUnsupported

    source = _source(tmp_path)
    with pytest.raises(KeyGroupsUnsupported, match="transform_with_state.*key groups") as refused:
        query = transform_with_state(input_stream(spark_session, source), running_count.RunningCount(),
                                     key_groups=64, **_where(tmp_path, lambda df, b: None))
        query.close()  # not refused: stop what started before the test fails
    assert refused.value.exit_code == 2
    assert not (tmp_path / "repo").exists() and not (tmp_path / "checkpoint").exists()  # nothing written


def test_transform_with_state_on_a_store_that_records_key_groups_is_refused_at_start(spark_session, tmp_path):
    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.group import GroupCommitter
    from blobstate.model import changelog
    from blobstate.model.keygroups import prefix
    from blobstate.model.records import StoreKey
    from blobstate.restoring import entries
    from blobstate.spark import transform_with_state
    from blobstate.spark.errors import KeyGroupsUnsupported
    from blobstate.worker import open_repository, stage_changelog

    key = StoreKey("tws", "group", "counts")
    repo = open_repository(f"file://{tmp_path}/repo", create=True)
    try:
        with StoreCommitter(key, repo, work_dir=str(tmp_path / "work"), ttl_ms=600_000) as owner:
            parts = [stage_changelog(repo, key, partition=p, batch_id=0, ttl_ms=600_000, data=changelog.encode(
                [(changelog.PUT, prefix(p * 32) + entries.encode(f"k{p}"), 1)])) for p in range(2)]
            GroupCommitter(owner, num_partitions=2, key_groups=64).commit(parts, batch_id=0)
    finally:
        repo.close()
    source = _source(tmp_path)
    with pytest.raises(KeyGroupsUnsupported, match="64 key groups") as refused:
        query = transform_with_state(input_stream(spark_session, source), running_count.RunningCount(),
                                     **_where(tmp_path, lambda df, b: None))
        query.close()
    assert refused.value.exit_code == 2
    assert not (tmp_path / "checkpoint").exists()
