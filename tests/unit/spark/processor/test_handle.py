"""The handle's rules (Spark's), TimerValues per time mode, getQueryInfo, deleteIfExists."""

from __future__ import annotations

import pytest

from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.spark.errors import StateSchemaError, StateVariableError
from blobstate.spark.processor.handle import Handle, QueryInfo, Runtime, canonical_time_mode
from blobstate.spark.processor.schema import parse
from blobstate.spark.processor.store import VALUES, Store
from tests.unit.spark.processor.conftest import raw_keys


def runtime(db, time_mode="ProcessingTime", at=100, watermark=None):
    return Runtime(Store(StagedWrites(db)), time_mode=time_mode, processing_time_ms=at, watermark_ms=watermark,
                   key_schema=parse("k string"), query=QueryInfo("query", "run", 7))


def test_declarations_belong_in_init_once_each(db):
    handle = Handle(runtime(db))
    handle.getValueState("a", "n long")
    with pytest.raises(StateVariableError, match="twice"):
        handle.getListState("a", "n long")
    handle.seal()
    with pytest.raises(StateVariableError, match="init"):
        handle.getValueState("b", "n long")
    with pytest.raises(StateVariableError, match="init"):
        handle.deleteIfExists("a")


def test_timers_need_a_time_mode_and_a_key(db):
    handle = Handle(runtime(db, time_mode="none"))
    with pytest.raises(StateVariableError, match="ProcessingTime"):
        handle.getValueState("a", "n long", ttlDurationMs=5)
    with pytest.raises(StateVariableError, match="timers need"):
        handle.registerTimer(5)
    handle2 = Handle(runtime(db))
    with pytest.raises(StateVariableError, match="grouping key"):
        handle2.registerTimer(5)  # in init: no key yet
    handle2._rt.current = b"\x06a\x00\x00"
    handle2.registerTimer(5)
    with pytest.raises(StateVariableError, match="int"):
        handle2.registerTimer("5")
    assert list(handle2.listTimers()) == [5]


def test_timer_values_and_query_info(db):
    assert runtime(db, time_mode="None").timer_values().getCurrentProcessingTimeInMs() == -1
    tv = runtime(db, time_mode="EventTime", at=100, watermark=40).timer_values()
    assert (tv.getCurrentProcessingTimeInMs(), tv.getCurrentWatermarkInMs()) == (100, 40)
    assert runtime(db).timer_values().getCurrentWatermarkInMs() == -1
    info = Handle(runtime(db)).getQueryInfo()
    assert (info.getQueryId(), info.getRunId(), info.getBatchId()) == ("query", "run", 7)
    assert canonical_time_mode("PROCESSINGTIME") == "ProcessingTime"
    with pytest.raises(StateVariableError):
        canonical_time_mode("wall")


def test_delete_if_exists_purges_the_variable_and_lets_it_come_back_with_another_schema(db):
    rt = runtime(db)
    handle = Handle(rt)
    v = handle.getValueState("a", "n long")
    handle.seal()
    rt.current = b"\x06k\x00\x00"
    v.update((1,))
    apply_ops(db, rt.store._view.ops())
    rt2 = runtime(db)
    with pytest.raises(StateSchemaError):
        h = Handle(rt2)
        h.getValueState("a", "n string")
        h.seal()
    rt3 = runtime(db)
    h3 = Handle(rt3)
    h3.deleteIfExists("a")
    v3 = h3.getValueState("a", "n string")
    h3.seal()
    rt3.current = b"\x06k\x00\x00"
    assert v3.get() is None
    apply_ops(db, rt3.store._view.ops())
    assert raw_keys(db, VALUES) == []


def test_check_declarations_runs_init_on_a_copy_and_refuses_an_incompatible_schema():
    from blobstate.spark.processor.handle import check_declarations
    from blobstate.spark.processor.metadata import Metadata, Variable
    from blobstate.spark.processor.schema import parse

    class Counter:
        def __init__(self, ddl: str) -> None:
            self.ddl = ddl

        def init(self, handle):
            self.count = handle.getValueState("count", self.ddl)

    recorded = Metadata("None", parse("k string"), {"count": Variable("count", 1, "value", [parse("n bigint")])}, 2)
    processor = Counter("n bigint, note string")
    new = check_declarations(processor, recorded, time_mode="None")  # a nullable field added: continues
    assert new.variables["count"].schemas[-1] == parse("n bigint, note string")
    assert not hasattr(processor, "count")  # the instance the query pickles carries nothing of the check
    with pytest.raises(StateSchemaError) as err:
        check_declarations(Counter("n string"), recorded, time_mode="None")
    assert err.value.variable == "count" and err.value.recorded == "n bigint" and err.value.declared == "n string"
