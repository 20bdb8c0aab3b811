"""The processor's handle (``StatefulProcessorHandle``), ``TimerValues``, ``ExpiredTimerInfo`` and ``QueryInfo``
with Spark's method names and rules, and the batch's runtime context behind them.

Spark's rules kept here: state variables are declared (``getValueState``/``getListState``/``getMapState``) and
dropped (``deleteIfExists``) only inside ``init``, each name once; a TTL needs the ProcessingTime time mode; timers
need a time mode other than None and a grouping key (so not in ``init``); ``TimerValues`` gives -1 for both times
in time mode None (pyspark's client does not ask the JVM then), else the batch's processing time and the
watermark (-1 when none). ``getQueryInfo`` is Scala's (pyspark 4.3's handle has none): the query id, run id and
batch id.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor import metadata as meta_doc
from blobstate.spark.processor.codec import KeyCodec
from blobstate.spark.processor.metadata import Declared, Metadata, Variable
from blobstate.spark.processor.schema import Schema, parse
from blobstate.spark.processor.state import KIND_CLASSES, MapState, _Variable
from blobstate.spark.processor.store import MAP, META_KEY, TTL_INDEX, VALUES, Store, space
from blobstate.spark.processor.timers import Timers
from blobstate.spark.processor.ttl import ttl_duration

TIME_MODES = {"none": "None", "processingtime": "ProcessingTime", "eventtime": "EventTime"}


def canonical_time_mode(name: str) -> str:
    """Spark's spelling of a time mode (``"None"``, ``"ProcessingTime"``, ``"EventTime"``; any case)."""
    mode = TIME_MODES.get(str(name).lower())
    if mode is None:
        raise StateVariableError(f"time mode {name!r}: expected one of None, ProcessingTime, EventTime")
    return mode


class TimerValues:
    """The batch's processing time and watermark, in ms (-1 when not available)."""

    def __init__(self, currentProcessingTimeInMs: int = -1, currentWatermarkInMs: int = -1) -> None:  # noqa: N803
        self._processing, self._watermark = currentProcessingTimeInMs, currentWatermarkInMs

    def getCurrentProcessingTimeInMs(self) -> int:  # noqa: N802
        return self._processing

    def getCurrentWatermarkInMs(self) -> int:  # noqa: N802
        return self._watermark


class ExpiredTimerInfo:
    """The timer that fired: its expiry time in ms."""

    def __init__(self, expiryTimeInMs: int = -1) -> None:  # noqa: N803
        self._expiry = expiryTimeInMs

    def getExpiryTimeInMs(self) -> int:  # noqa: N802
        return self._expiry


class QueryInfo:
    """Which query, run and batch this is (Scala's ``QueryInfo``)."""

    def __init__(self, query_id: str, run_id: str, batch_id: int) -> None:
        self._query_id, self._run_id, self._batch_id = query_id, run_id, batch_id

    def getQueryId(self) -> str:  # noqa: N802
        return self._query_id

    def getRunId(self) -> str:  # noqa: N802
        return self._run_id

    def getBatchId(self) -> int:  # noqa: N802
        return self._batch_id

    def __repr__(self) -> str:
        return f"QueryInfo(queryId={self._query_id}, runId={self._run_id}, batchId={self._batch_id})"


class Runtime:
    """One batch of one partition: the store, the times, the current grouping key, the timers, the metadata."""

    def __init__(self, store: Store, *, time_mode: str, processing_time_ms: int, watermark_ms: int | None,
                 key_schema: Schema | None, query: QueryInfo) -> None:
        self.store = store
        self.time_mode = canonical_time_mode(time_mode)
        self.processing_time_ms = processing_time_ms
        self.watermark_ms = -1 if watermark_ms is None else watermark_ms
        self.metadata: Metadata = meta_doc.load(store)
        self.key_schema = key_schema
        # a batch without input (timers only) decodes keys with the recorded key schema
        self.key_codec = KeyCodec(key_schema or self.metadata.key_schema or Schema(()), what="grouping key")
        self.query = query
        self.timers = None if self.time_mode == "None" else Timers(store, self.time_mode)
        self.current: bytes | None = None
        self.variables: dict[str, _Variable] = {}

    def grouping_key(self) -> bytes:
        """The current grouping key's bytes; ``StateVariableError`` outside a per-key call (e.g. in ``init``)."""
        if self.current is None:
            raise StateVariableError("state and timer calls act on the current grouping key: make them in "
                                     "handleInputRows, handleExpiredTimer or handleInitialState, not in init/close")
        return self.current

    def timer_values(self) -> TimerValues:
        if self.time_mode == "None":
            return TimerValues(-1, -1)
        return TimerValues(self.processing_time_ms, self.watermark_ms)

    def next_times(self) -> tuple[int | None, int | None]:
        """``(earliest timer, earliest TTL expiry)`` in ms after this batch's writes (None: none): when a batch
        without input would have something to do."""
        timer = None if self.timers is None else self.timers.earliest()
        expiries = [e for e in (v.next_expiry() for v in self.variables.values()) if e is not None]
        return timer, min(expiries) if expiries else None

    def sweep(self) -> int:
        """The TTL sweep of every declared variable; the number of values removed."""
        return sum(v.sweep() for v in self.variables.values())


class Handle:
    """``StatefulProcessorHandle``: what ``init`` declares, timers, ``getQueryInfo``."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime
        self._declared: list[Declared] = []
        self._deleted: list[str] = []
        self._in_init = True

    def _declare(self, stateName: str, kind: str, schema: Any, user_key: Any, ttl_ms: Any) -> _Variable:  # noqa: N803
        if not self._in_init:
            raise StateVariableError(f"state variable {stateName!r}: declare state variables in init()")
        if not isinstance(stateName, str) or not stateName:
            raise StateVariableError(f"a state variable's name is a non-empty string, not {stateName!r}")
        if any(d.name == stateName for d in self._declared):
            raise StateVariableError(f"state variable {stateName!r} is declared twice")
        what = f"state variable {stateName!r}"
        declared = Declared(stateName, kind, parse(schema, what=what),
                            None if user_key is None else parse(user_key, what=f"{what} user key"),
                            ttl_duration(ttl_ms, name=stateName, time_mode=self._rt.time_mode))
        self._declared.append(declared)
        provisional = Variable(stateName, 0, kind, [declared.schema], declared.user_key, declared.ttl_ms)
        variable = KIND_CLASSES[kind](self._rt, provisional)
        self._rt.variables[stateName] = variable
        return variable

    def getValueState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> Any:  # noqa: N802, N803
        """A ``ValueState`` of ``schema`` (a DDL string or StructType), with an optional TTL in ms."""
        return self._declare(stateName, "value", schema, None, ttlDurationMs)

    def getListState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> Any:  # noqa: N802, N803
        """A ``ListState`` of ``schema``, with an optional per-element TTL in ms."""
        return self._declare(stateName, "list", schema, None, ttlDurationMs)

    def getMapState(self, stateName: str, userKeySchema: Any, valueSchema: Any,  # noqa: N802, N803
                    ttlDurationMs: int | None = None) -> MapState:  # noqa: N803
        """A ``MapState`` from ``userKeySchema`` to ``valueSchema``, with an optional per-entry TTL in ms."""
        return self._declare(stateName, "map", valueSchema, userKeySchema, ttlDurationMs)  # type: ignore[return-value]

    def deleteIfExists(self, stateName: str) -> None:  # noqa: N802, N803
        """Drop variable ``stateName`` and all its records (in ``init``; absent is fine)."""
        if not self._in_init:
            raise StateVariableError(f"state variable {stateName!r}: deleteIfExists belongs in init()")
        self._deleted.append(stateName)

    def _timers(self) -> Timers:
        if self._rt.timers is None:
            raise StateVariableError("timers need timeMode 'ProcessingTime' or 'EventTime' (this query has None)")
        return self._rt.timers

    def registerTimer(self, expiryTimestampMs: int) -> None:  # noqa: N802, N803
        """Register a timer at ``expiryTimestampMs`` for the current grouping key (again: no change)."""
        self._timers().register(self._rt.grouping_key(), _ms(expiryTimestampMs))

    def deleteTimer(self, expiryTimestampMs: int) -> None:  # noqa: N802, N803
        """Delete the current key's timer at ``expiryTimestampMs`` (absent: no change)."""
        self._timers().delete(self._rt.grouping_key(), _ms(expiryTimestampMs))

    def listTimers(self) -> Iterator[int]:  # noqa: N802
        """The current key's registered timers (ms), ascending."""
        return iter(self._timers().of_key(self._rt.grouping_key()))

    def getQueryInfo(self) -> QueryInfo:  # noqa: N802
        return self._rt.query

    def seal(self) -> list[Variable]:
        """End of ``init``: reconcile the declarations with the store's record (``StateSchemaError`` before any
        write on an incompatible one), purge what ``deleteIfExists`` dropped, record the metadata, bind the
        variables. Returns the purged variables."""
        self._in_init = False
        rt = self._rt
        new, purge = meta_doc.reconcile(rt.metadata, self._declared, self._deleted, time_mode=rt.time_mode,
                                        key_schema=rt.key_schema)
        for gone in purge:
            for kind in (VALUES, MAP, TTL_INDEX):
                prefix = space(kind, gone.vid)
                for key, _ in list(rt.store.scan(prefix)):
                    rt.store.delete(key)
        meta_doc.save(rt.store, rt.metadata, new)
        rt.metadata = new
        for name, variable in rt.variables.items():
            variable._bind(new.variables[name])
        return purge


def _ms(value: Any) -> int:
    item = getattr(value, "item", None)
    value = item() if item is not None and not isinstance(value, int) else value
    if isinstance(value, bool) or not isinstance(value, int):
        raise StateVariableError(f"a timer's expiry is an int of ms since the epoch, not {type(value).__name__}")
    return value


def check_declarations(processor: Any, metadata: Metadata, *, time_mode: str) -> Metadata:
    """Run ``init`` of a shallow copy of ``processor`` (the caller's instance, pickled later, keeps nothing of
    this) against a handle that only records what it declares (no state is read or written) and reconcile that
    with ``metadata``, a store's recorded document: the check a restart makes before anything runs (Spark's driver
    runs ``init`` for the schemas too). Returns the document a first batch would record. Raises
    ``StateSchemaError`` (exit 2, naming the variable and both schemas) on an incompatible declaration,
    ``StateVariableError`` on a misuse of the API in ``init``, and what ``init`` raises."""
    store = Store({META_KEY: metadata.to_json().encode()})  # read only: the recorded document, nothing else
    runtime = Runtime(store, time_mode=time_mode, processing_time_ms=0, watermark_ms=None, key_schema=None,
                      query=QueryInfo("", "", -1))
    handle = Handle(runtime)
    copy.copy(processor).init(handle)  # the caller's instance keeps nothing of this check (it is pickled later)
    handle._in_init = False
    new, _ = meta_doc.reconcile(metadata, handle._declared, handle._deleted, time_mode=runtime.time_mode,
                                key_schema=None)
    return new
