"""The N highest scores per key in a ListState, emitted as (key, rank, score) after every batch that changes them."""

from __future__ import annotations

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

N = 3
OUTPUT = "k string, rank int, score long"


class TopN(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.top = handle.getListState("top", "score long")

    def handleInputRows(self, key, rows, timerValues):
        scores = [row[0] for row in self.top.get()]
        for pdf in rows:
            scores.extend(int(s) for s in pdf["score"])
        best = sorted(scores, reverse=True)[:N]
        self.top.put([(s,) for s in best])
        yield pd.DataFrame({"k": [key[0]] * len(best), "rank": list(range(1, len(best) + 1)), "score": best})
