"""Deduplication with a TTL: the first row of an id is emitted, repeats are dropped while the id is remembered;
the memory of an id lasts TTL_MS of processing time after it was first seen (Spark's TTL example)."""

from __future__ import annotations

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

TTL_MS = 10_000
OUTPUT = "id string, value long"


class Dedup(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.seen = handle.getValueState("seen", "seen boolean", ttlDurationMs=TTL_MS)

    def handleInputRows(self, key, rows, timerValues):
        if self.seen.exists():
            return
        first = min(int(pdf["value"].min()) for pdf in rows)
        self.seen.update((True,))
        yield pd.DataFrame({"id": [key[0]], "value": [first]})
