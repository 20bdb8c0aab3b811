"""Session windows closed by an event-time timer: a user's session lasts while events come less than GAP_MS apart
in event time; an event-time timer at (last event + GAP_MS) closes it once the watermark passes, emitting the
session (Spark's session window example with transformWithState)."""

from __future__ import annotations

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

GAP_MS = 30_000
WATERMARK_DELAY_MS = 10_000
OUTPUT = "user string, start_ms long, end_ms long, events long"


class Sessions(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.session = handle.getValueState("session", "start_ms long, last_ms long, events long")

    def handleInputRows(self, key, rows, timerValues):
        pdf = pd.concat(list(rows))
        times = [int(t.timestamp() * 1000) for t in pdf["ts"]]
        current = self.session.get()
        if current is None:
            start, last, events = min(times), max(times), len(times)
        else:
            self.handle.deleteTimer(current[1] + GAP_MS)
            start, last, events = min(current[0], *times), max(current[1], *times), current[2] + len(times)
        self.session.update((start, last, events))
        self.handle.registerTimer(last + GAP_MS)
        return iter([])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        start, last, events = self.session.get()
        self.session.clear()
        yield pd.DataFrame({"user": [key[0]], "start_ms": [start], "end_ms": [last + GAP_MS], "events": [events]})
