"""``blobstate.spark.data.metadata``: a processor store's metadata document found on the driver, from the newest
changelogs that wrote it, else from one restored chain (real RocksDB, a ``file://`` repository; no Spark)."""

from __future__ import annotations

import pandas as pd

from blobstate.entry import open_repository
from blobstate.model.records import StoreKey
from blobstate.restoring.state import plan_state
from blobstate.spark.data import metadata as found
from blobstate.spark.processor import ProcessorSpec
from blobstate.spark.processor.schema import parse
from tests.processors import running_count
from tests.processors.running_count import RunningCount
from tests.support.processor_store import commit_batches

KEY = StoreKey("j", "0", "s")
SPEC = ProcessorSpec(("k",), running_count.OUTPUT)


class CountWithNote(RunningCount):
    def init(self, handle):
        self.count = handle.getValueState("count", "count long, note string")

    def handleInputRows(self, key, rows, timerValues):
        self.count.update((1, None))
        return iter(())


def frames(n: int) -> list[pd.DataFrame]:
    return [pd.DataFrame({"k": [f"k{i}", "a"]}) for i in range(n)]


def test_the_newest_document_written_by_a_changelog_wins(tmp_path):
    makers = iter([RunningCount, RunningCount, CountWithNote])  # batch 2 adds a nullable field: a new document
    repo, _ = commit_batches(tmp_path, lambda: next(makers)(), SPEC, frames(3), "count")
    with open_repository(repo, None, None, settings=_settings()) as repository:
        chains = plan_state(repository, KEY).chains.values()
        records = [cp for chain in chains for cp in chain.records]
        doc = found.written_metadata(repository, records)
        assert doc is not None and doc.variables["count"].schemas == [parse("count bigint"),
                                                                      parse("count bigint, note string")]
        older = found.written_metadata(repository, [r for r in records if r.batch_id < 2])
        assert older is not None and older.variables["count"].schemas == [parse("count bigint")]


def test_without_a_changelog_that_wrote_it_one_chain_is_restored(tmp_path):
    repo, _ = commit_batches(tmp_path, RunningCount, SPEC, frames(3), "count", snapshot_at=0)
    with open_repository(repo, None, None, settings=_settings()) as repository:
        chains = list(plan_state(repository, KEY).chains.values())
        assert found.written_metadata(repository, [cp for c in chains for cp in c.records]) is None  # deltas 1, 2
        doc = found.store_metadata(repository, chains)
    assert doc.key_schema == parse("k string") and sorted(doc.variables) == ["count"]


def _settings():
    from blobstate.config.settings import Settings

    return Settings.for_call(None)
