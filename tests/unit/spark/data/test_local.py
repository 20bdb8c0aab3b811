"""``blobstate.spark.data.local.variable_rows``: a processor's variable read on this machine without Spark, checked
at once (a wrong name raises before any row is read), at the newest batch or an older one."""

from __future__ import annotations

import pandas as pd
import pytest

from blobstate.spark.data.local import variable_rows
from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor import ProcessorSpec
from tests.processors import running_count
from tests.support.processor_store import commit_batches


def test_the_rows_of_a_variable_at_the_newest_and_an_older_batch(tmp_path):
    frames = [pd.DataFrame({"k": ["a", "b", "a"]}), pd.DataFrame({"k": ["b", "c"]})]
    repo, expected = commit_batches(tmp_path, running_count.RunningCount, ProcessorSpec(("k",), running_count.OUTPUT),
                                    frames, "count")
    assert list(variable_rows(repo=repo, job="j", store="s", state_var="count")) == expected[1]
    assert list(variable_rows(repo=repo, job="j", store="s", state_var="count", batch_id=0)) == expected[0]
    assert [(r["key"]["k"], r["value"]["count"]) for r in expected[1]] == [("a", 2), ("b", 2), ("c", 1)]
    with pytest.raises(StateVariableError, match="it has: count"):
        variable_rows(repo=repo, job="j", store="s", state_var="total")  # at the call, not at the first row
    assert list(variable_rows(repo=repo, job="j", store="s", state_var=None, timers=True)) == []
