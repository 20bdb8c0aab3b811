"""Visits per page for each user in a MapState (user key: the page) whose entries expire TTL_MS of processing time
after their last update; emits (user, page, visits) for the pages a batch touched."""

from __future__ import annotations

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

TTL_MS = 5_000
OUTPUT = "user string, page string, visits long"


class PageVisits(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.visits = handle.getMapState("visits", "page string", "visits long", ttlDurationMs=TTL_MS)

    def handleInputRows(self, key, rows, timerValues):
        counts = pd.concat(list(rows))["page"].value_counts()
        pages, totals = [], []
        for page, n in sorted(counts.items()):
            before = self.visits.getValue((page,))
            total = (before[0] if before is not None else 0) + int(n)
            self.visits.updateValue((page,), (total,))
            pages.append(page)
            totals.append(total)
        yield pd.DataFrame({"user": [key[0]] * len(pages), "page": pages, "visits": totals})
