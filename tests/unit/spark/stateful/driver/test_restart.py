"""``blobstate.spark.stateful.driver.restart.refuse_incompatible``: a restart's declarations against what the store
recorded, before the query starts (real ``file://`` repositories; no Spark)."""

from __future__ import annotations

import pandas as pd
import pytest

from blobstate.spark.errors import StateSchemaError, StateVariableError
from blobstate.spark.processor import ProcessorSpec
from blobstate.spark.stateful.driver.restart import refuse_incompatible
from tests.processors import running_count
from tests.support.processor_store import commit_batches


class Retyped(running_count.RunningCount):
    def init(self, handle):
        self.count = handle.getValueState("count", "count string")


class Widened(running_count.RunningCount):
    def init(self, handle):
        self.count = handle.getValueState("count", "count long, note string")


class TtlWithoutProcessingTime(running_count.RunningCount):
    def init(self, handle):
        self.count = handle.getValueState("count", "count long", ttlDurationMs=1_000)


def test_a_new_repository_has_no_record_yet_init_is_checked_for_misuse(tmp_path):
    where = dict(repo=f"file://{tmp_path}/none", job="j", store="s", partitioned=False)
    refuse_incompatible(Retyped(), time_mode="None", **where)
    with pytest.raises(StateVariableError, match="ProcessingTime"):
        refuse_incompatible(TtlWithoutProcessingTime(), time_mode="None", **where)


def test_an_incompatible_declaration_is_refused_and_a_compatible_one_passes(tmp_path):
    repo, _ = commit_batches(tmp_path, running_count.RunningCount, ProcessorSpec(("k",), running_count.OUTPUT),
                             [pd.DataFrame({"k": ["a"]})], "count")
    where = dict(repo=repo, job="j", store="s", partitioned=False)
    with pytest.raises(StateSchemaError) as refused:
        refuse_incompatible(Retyped(), time_mode="None", **where)
    assert refused.value.variable == "count" and refused.value.exit_code == 2
    assert (refused.value.recorded, refused.value.declared) == ("count bigint", "count string")
    with pytest.raises(StateSchemaError, match="time mode"):
        refuse_incompatible(running_count.RunningCount(), time_mode="ProcessingTime", **where)
    refuse_incompatible(Widened(), time_mode="None", **where)
    refuse_incompatible(Retyped(), time_mode="None", **dict(where, store="other"))  # another store: new
