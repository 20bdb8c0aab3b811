"""The metrics of real commits (blobstate's API on a local repository), read with the OpenTelemetry SDK's
InMemoryMetricReader: ``pytest tests`` in this directory, with blobstate and this distribution installed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import blobstate
from blobstate import hookimpl
from blobstate.errors import FencedError
from blobstate.plugin.manager import build_plugin_manager, reset_plugin_manager
from blobstate_otel import CommitMetrics


class _Observer:
    def __init__(self, metrics: CommitMetrics) -> None:
        self.metrics = metrics

    @hookimpl
    def blobstate_journal_event(self, event: Any, store_key: Any) -> None:
        self.metrics.observe(event, store_key)


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    mgr = build_plugin_manager(autoload=False)
    mgr.register(_Observer(CommitMetrics(MeterProvider(metric_readers=[reader]))), "otel_under_test")
    reset_plugin_manager(mgr)
    yield reader
    reset_plugin_manager()


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def test_commit_count_duration_bytes_and_last_success(reader: InMemoryMetricReader, tmp_path: Path) -> None:
    store = tmp_path / "counts"
    store.mkdir()
    (store / "a.bin").write_bytes(b"a" * 5000)
    repo, work = str(tmp_path / "repo"), str(tmp_path / "work")
    before = time.time()
    first = blobstate.backup(str(store), repo=repo, work_base=work)
    (store / "b.bin").write_bytes(b"b" * 3000)
    second = blobstate.backup(str(store), repo=repo, work_base=work)
    with pytest.raises(FencedError):  # a zombie writer: aborted after its start
        blobstate.backup(str(store), repo=repo, work_base=work, expected_generation=1)
    after = time.time()

    got = points(reader)
    key = "default/0/counts"
    commits = {p.attributes["blobstate.outcome"]: p.value for p in got["blobstate.commits"]}
    assert commits == {"committed": 2, "aborted": 1}
    assert all(p.attributes["blobstate.store_key"] == key for p in got["blobstate.commits"])
    durations = {p.attributes["blobstate.outcome"]: p for p in got["blobstate.commit.duration"]}
    assert durations["committed"].count == 2 and durations["aborted"].count == 1
    assert 0 < durations["committed"].sum < after - before
    uploaded = got["blobstate.commit.uploaded"]
    assert [p.value for p in uploaded] == [first.bytes_uploaded + second.bytes_uploaded] == [8000]
    last = got["blobstate.last_successful_commit.time"]
    assert [p.attributes["blobstate.store_key"] for p in last] == [key]
    assert second.checkpoint.created_time_ms / 1000 <= last[0].value <= after
