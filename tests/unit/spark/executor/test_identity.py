"""``blobstate.spark.executor.identity``: outside a Spark task a task knows nobody (the driver, a test, the
simulator calling a task in-process), and asking for its partition is an error rather than a guess."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from blobstate.spark.executor.identity import TaskIdentity, task_identity, task_partition  # noqa: E402


def test_outside_a_task_the_identity_is_unknown_and_the_partition_is_refused():
    assert task_identity() == TaskIdentity("", 0, 0, 0, -1)  # no executor named: placement records nothing
    with pytest.raises(RuntimeError, match="outside a Spark task"):
        task_partition()
