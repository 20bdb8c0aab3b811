"""One micro-batch of a stateful processor on one partition's store: the order of calls Spark's
``TransformWithStateExec`` makes, without Spark.

``run_batch``:

1. ``processor.init(handle)``; the declarations are reconciled with the store's metadata (``Handle.seal``: an
   incompatible schema raises ``StateSchemaError`` before anything is written);
2. with an initial state (the first batch only; the caller decides), ``handleInitialState`` per key (pandas: per
   DataFrame chunk of the key's rows; rows: per Row), before that key's input;
3. in EventTime mode, input rows at or below the late-events watermark are dropped; the rest grouped by key
   (``grouping.group_by_key``) and ``handleInputRows(key, rows, timerValues)`` called per key, its output consumed;
4. the timers due (processing time, or the watermark in EventTime mode; ``expiry <= threshold``), taken as a
   snapshot in time order: per timer still registered, ``handleExpiredTimer(key, timerValues, expiredTimerInfo)``,
   its output consumed, then the timer deleted (after the call, as Spark does: a handler re-registering the same
   instant does not keep it). A no-data batch (``data=None``) runs only this step and the next;
5. ``close()``, then the TTL sweep (ProcessingTime mode).

Every write goes to the caller's ``StagedWrites``: nothing reaches RocksDB, and the same writes are the batch's
changelog. The same store state, input, processing time and watermark give the same writes and the same output
(keys in sorted order, each key's rows in arrival order): a re-run after a crash is the same batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from blobstate.model.changelog import StagedWrites
from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.grouping import PandasInputs, RowInputs, as_table, group_by_key
from blobstate.spark.processor.handle import ExpiredTimerInfo, Handle, QueryInfo, Runtime, canonical_time_mode
from blobstate.spark.processor.output import OutputCollector
from blobstate.spark.processor.schema import Field, Schema, from_arrow_type, parse
from blobstate.spark.processor.store import Store

FLAVOURS = ("pandas", "rows")


@dataclass(frozen=True)
class ProcessorSpec:
    """How a processor runs: the grouping ``key_columns``, the ``output_schema`` (DDL or StructType),
    ``time_mode`` (``"None"``, ``"ProcessingTime"``, ``"EventTime"``), ``flavour`` (``"pandas"`` as
    ``transformWithStateInPandas``, ``"rows"`` as ``transformWithState``), the ``event_time_column`` (EventTime),
    ``max_records`` per DataFrame (Spark's ``arrow.maxRecordsPerBatch``), and the ids ``getQueryInfo`` gives."""

    key_columns: tuple[str, ...]
    output_schema: Any
    time_mode: str = "None"
    flavour: str = "pandas"
    event_time_column: str | None = None
    max_records: int = 10_000
    query_id: str = ""
    run_id: str = ""


@dataclass(frozen=True)
class BatchTimes:
    """The batch's times, fixed for a re-run: ``processing_time_ms`` (Spark's batch timestamp, from its offset
    log), ``watermark_ms`` (event-time watermark for timers: what batches before this one saw, None: none) and
    ``late_watermark_ms`` (input rows whose event time is at or below it are late and dropped; None: keep all)."""

    batch_id: int
    processing_time_ms: int
    watermark_ms: int | None = None
    late_watermark_ms: int | None = None


@dataclass
class BatchStats:
    """Counts, wall times (``ms``) and the process's CPU times (``cpu_ms``) per phase of one ``run_batch``;
    ``next_timer_ms``/``next_expiry_ms``: the earliest timer and TTL expiry left registered (None: none), so the
    driver knows when a batch without input has work (a processing-time timer or a TTL due at its processing time;
    event-time timers wait for the watermark)."""

    rows_in: int = 0
    rows_late: int = 0
    keys: int = 0
    initial_keys: int = 0
    timers_fired: int = 0
    values_expired: int = 0
    rows_out: int = 0
    writes: int = 0
    next_timer_ms: int | None = None
    next_expiry_ms: int | None = None
    ms: dict[str, float] = field(default_factory=dict)
    cpu_ms: dict[str, float] = field(default_factory=dict)


class _Phases:
    """Wall and CPU (the process's) time of a batch's phases into ``stats.ms`` / ``stats.cpu_ms``."""

    def __init__(self, stats: BatchStats) -> None:
        self.stats = stats
        self.wall0 = self.wall = time.perf_counter()
        self.cpu0 = self.cpu = time.process_time()

    def start(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def end(self, name: str) -> None:
        self.stats.ms[name] = (time.perf_counter() - self.wall) * 1000
        self.stats.cpu_ms[name] = (time.process_time() - self.cpu) * 1000

    def total(self) -> None:
        self.stats.ms["total"] = (time.perf_counter() - self.wall0) * 1000
        self.stats.cpu_ms["total"] = (time.process_time() - self.cpu0) * 1000


@dataclass
class BatchResult:
    """The batch's output rows (``output``, a ``pyarrow.Table`` of the output schema) and its ``stats``; the writes
    are in the ``StagedWrites`` given to ``run_batch``."""

    output: Any
    stats: BatchStats


def advance_watermark(previous_ms: int | None, max_event_time_ms: int | None, delay_ms: int) -> int | None:
    """The watermark after a batch whose rows' largest event time is ``max_event_time_ms``: Spark's
    ``max(previous, max event time - delay)``, never going back (None: no event seen yet)."""
    if max_event_time_ms is None:
        return previous_ms
    candidate = max_event_time_ms - delay_ms
    return candidate if previous_ms is None else max(previous_ms, candidate)


def key_schema_of(table: Any, key_columns: tuple[str, ...]) -> Schema:
    """The grouping key's schema from the input's Arrow schema."""
    missing = [c for c in key_columns if c not in table.column_names]
    if missing:
        raise StateVariableError(f"key columns {missing} are not among the input's columns {table.column_names}")
    return Schema(tuple(Field(c, from_arrow_type(table.schema.field(c).type, what=f"key column {c!r}"))
                        for c in key_columns))


def _drop_late(table: Any, column: str, late_ms: int) -> tuple[Any, int]:
    import pyarrow as pa
    import pyarrow.compute as pc

    if column not in table.column_names:
        raise StateVariableError(f"event time column {column!r} is not among the input's columns")
    values = table.column(column)
    if not pa.types.is_timestamp(values.type):
        raise StateVariableError(f"event time column {column!r} must be a timestamp, not {values.type}")
    micros = pc.cast(pc.cast(values, pa.timestamp("us", tz=values.type.tz)), pa.int64())
    keep = pc.fill_null(pc.greater(micros, late_ms * 1000), True)
    kept = table.filter(keep)
    return kept, table.num_rows - kept.num_rows


def _no_initial_state(key: Any, state: Any, timer_values: Any) -> None:
    return None


def _no_timer_output(key: Any, timer_values: Any, info: Any) -> None:
    return None


def run_batch(processor: Any, staged: StagedWrites, data: Any, spec: ProcessorSpec, times: BatchTimes, *,
              initial_state: Any = None, initial_key_columns: tuple[str, ...] | None = None) -> BatchResult:
    """Run one batch of ``processor`` (a ``StatefulProcessor``: a new instance or the same one each batch) over
    ``data`` (a ``pyarrow`` Table/RecordBatch/iterable of RecordBatches; None for a no-data batch) on ``staged``.

    Raises ``StateSchemaError`` (before any write) when the declarations do not match the store's record,
    ``StateVariableError`` for a misuse of the API, and whatever the processor raises; the caller discards
    ``staged`` then."""
    if spec.flavour not in FLAVOURS:
        raise StateVariableError(f"flavour {spec.flavour!r}: expected one of {FLAVOURS}")
    stats = BatchStats()
    phase = _Phases(stats)
    time_mode = canonical_time_mode(spec.time_mode)
    table = as_table(data)
    init_table = as_table(initial_state)
    key_columns = tuple(spec.key_columns)
    key_schema = key_schema_of(table, key_columns) if table is not None else None
    if init_table is not None:
        init_keys = key_schema_of(init_table, tuple(initial_key_columns or key_columns))
        if key_schema is not None and [f.type for f in init_keys.fields] != [f.type for f in key_schema.fields]:
            raise StateVariableError(f"the initial state's key ({init_keys.ddl()}) is not the input's key "
                                     f"({key_schema.ddl()})")
        key_schema = key_schema or Schema(tuple(Field(c, f.type) for c, f in zip(key_columns, init_keys.fields,
                                                                                    strict=True)))
    store = Store(staged)
    query = QueryInfo(spec.query_id, spec.run_id, times.batch_id)
    rt = Runtime(store, time_mode=time_mode, processing_time_ms=times.processing_time_ms,
                 watermark_ms=times.watermark_ms, key_schema=key_schema, query=query)
    handle = Handle(rt)
    processor.init(handle)
    handle.seal()
    out = OutputCollector(parse(spec.output_schema, what="output schema"), spec.flavour)
    timer_values = rt.timer_values()
    phase.end("init")

    if init_table is not None and init_table.num_rows:
        phase.start()
        handle_initial = getattr(processor, "handleInitialState", None) or _no_initial_state
        groups = group_by_key(init_table, tuple(initial_key_columns or key_columns))
        inputs = PandasInputs(groups, spec.max_records) if spec.flavour == "pandas" else RowInputs(groups)
        for i, key in enumerate(groups.keys):
            rt.current = rt.key_codec.encode(key)
            items = inputs.frames(i) if isinstance(inputs, PandasInputs) else inputs.rows(i)
            for item in items:
                handle_initial(key, item, timer_values)
        rt.current = None
        stats.initial_keys = len(groups)
        phase.end("initial_state")

    if table is not None:
        stats.rows_in = table.num_rows
        if time_mode == "EventTime" and spec.event_time_column and times.late_watermark_ms is not None:
            table, stats.rows_late = _drop_late(table, spec.event_time_column, times.late_watermark_ms)
        phase.start()
        groups = group_by_key(table, key_columns)
        inputs = PandasInputs(groups, spec.max_records) if spec.flavour == "pandas" else RowInputs(groups)
        phase.end("group")
        phase.start()
        for i, key in enumerate(groups.keys):
            rt.current = rt.key_codec.encode(key)
            rows = inputs.frames(i) if isinstance(inputs, PandasInputs) else inputs.rows(i)
            out.add(processor.handleInputRows(key, rows, timer_values), where="handleInputRows")
        rt.current = None
        stats.keys = len(groups)
        phase.end("input")

    phase.start()
    threshold = times.processing_time_ms if time_mode == "ProcessingTime" else times.watermark_ms
    if rt.timers is not None and threshold is not None:
        on_timer = getattr(processor, "handleExpiredTimer", None) or _no_timer_output
        for ts, gkey in rt.timers.due(threshold):
            if not rt.timers.exists(gkey, ts):
                continue  # deleted by an earlier call of this batch
            key = rt.key_codec.decode(gkey)[0]
            rt.current = gkey
            out.add(on_timer(key, timer_values, ExpiredTimerInfo(ts)),
                    where="handleExpiredTimer")
            rt.timers.delete(gkey, ts)
            stats.timers_fired += 1
        rt.current = None
    phase.end("timers")

    close = getattr(processor, "close", None)
    if close is not None:
        close()
    phase.start()
    if time_mode == "ProcessingTime":
        stats.values_expired = rt.sweep()
    stats.next_timer_ms, stats.next_expiry_ms = rt.next_times()
    phase.end("sweep")
    phase.start()
    result = out.table()
    phase.end("output")
    stats.rows_out = result.num_rows
    stats.writes = len(staged)
    phase.total()
    return BatchResult(result, stats)
