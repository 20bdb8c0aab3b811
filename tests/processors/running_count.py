"""A running count of rows per key in a ValueState (the first example of Spark's transformWithState guide)."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

OUTPUT = "k string, count long"


class RunningCount(StatefulProcessor):
    """transformWithStateInPandas: emits (k, count so far) for each key seen in the batch."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.count = handle.getValueState("count", "count long")

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        count = self.count.get()[0] if self.count.exists() else 0
        for pdf in rows:
            count += len(pdf)
        self.count.update((count,))
        yield pd.DataFrame({"k": [key[0]], "count": [count]})

    def close(self) -> None:
        pass


class RunningCountFrom(RunningCount):
    """The running count started from an initial state (a DataFrame of ``k, count``): ``handleInitialState`` sets
    a key's count from it in the first batch, before that key's input (Spark's initial-state example)."""

    def handleInitialState(self, key, initialState, timerValues) -> None:
        self.count.update((int(initialState.at[0, "count"]),))


class RunningCountRows(StatefulProcessor):
    """transformWithState (rows flavour): the same count over Row objects."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.count = handle.getValueState("count", "count long")

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        current = self.count.get()
        count = current[0] if current is not None else 0
        for _ in rows:
            count += 1
        self.count.update((count,))
        yield Row(k=key[0], count=count)
