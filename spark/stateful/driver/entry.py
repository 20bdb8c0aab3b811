"""``transform_with_state``: a processor class written for Spark 4's ``StatefulProcessor`` run on blobstate state,
as Spark's ``transformWithStateInPandas`` (pandas flavour) / ``transformWithState`` (rows flavour) would run it, and
the query it runs in; ``StatefulQuery``, that query with the blobstate state behind it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from blobstate.errors import ConfigurationError, MissingDependencyError
from blobstate.spark.binding.lifecycle import register
from blobstate.spark.committed.location import is_connect
from blobstate.spark.partitioned.driver.state import partitioned
from blobstate.spark.processor import ProcessorSpec
from blobstate.spark.processor.handle import canonical_time_mode
from blobstate.spark.stateful.driver.inputs import initial_rows, watermarked, with_heartbeat
from blobstate.spark.stateful.driver.on_driver import DriverRun
from blobstate.spark.stateful.driver.on_partitions import PartitionedRun
from blobstate.spark.stateful.driver.restart import refuse_incompatible

MIN_PYSPARK = (4, 0)


def require_pyspark(version: str | None = None) -> None:
    """Raise ``MissingDependencyError`` (exit 2), in one line, unless pyspark >= 4.0 is installed (Spark's
    ``StatefulProcessor`` API); ``version``: the version to check (default: the installed one)."""
    if version is None:
        try:
            import pyspark
        except ImportError:
            version = None
        else:
            version = pyspark.__version__
    parts = tuple(int(p) for p in (version or "0").split(".")[:2] if p.isdigit())
    if version is None or parts < MIN_PYSPARK:
        found = f"pyspark {version}" if version else "no pyspark"
        raise MissingDependencyError(f"blobstate.spark.transform_with_state needs pyspark >= 4.0 (Spark's "
                                     f"StatefulProcessor API), found {found}: pip install 'pyspark[sql]>=4.0'")


def refuse_under_connect(spark: Any, *, initial_state: Any) -> None:
    """Raise ``ConfigurationError`` (exit 2), in one line, for what cannot run under Spark Connect (``spark`` a
    Connect session): ``initial_state``. ``foreachBatch`` runs in the server's Python worker on a session of its own
    (a clone of the client's), and a Connect DataFrame belongs to the session that made it: the initial state's rows,
    pickled with the batch function, cannot be unioned into the batch's DataFrame there (Spark's
    ``SESSION_NOT_SAME``), and the batch would fail after the query started."""
    if initial_state is not None and is_connect(spark):
        raise ConfigurationError("initial_state is not available under Spark Connect (the batches run on the "
                                 "server's own session, which cannot use a client's DataFrame): write the initial "
                                 "state with blobstate.spark.write_state(..., initial_state=True) first, or run on "
                                 "classic PySpark")


class StatefulQuery:
    """The ``StreamingQuery`` of a stateful processor (every attribute of Spark's is here: ``awaitTermination``,
    ``stop``, ``lastProgress``, ...), with its blobstate ``state`` (a ``StateBinding`` or a ``PartitionedState``);
    ``close()`` stops the query and releases the state (the binding's last snapshot drained)."""

    def __init__(self, query: Any, state: Any) -> None:
        self.query = query
        self.state = state

    def __getattr__(self, name: str) -> Any:
        return getattr(self.query, name)

    def close(self) -> None:
        self.state.close()


def transform_with_state(df: Any, processor: Any, *, key_cols: list[str], output_schema: Any,
                         sink: Callable[[Any, int], None], repo: str, checkpoint_location: str, job: str,
                         store: str, time_mode: str = "None", num_partitions: int | None = None,
                         flavour: str = "pandas", event_time_column: str | None = None,
                         watermark_delay_ms: int = 0, initial_state: Any = None, trigger: dict[str, Any] | None = None,
                         heartbeat: bool = False, state_dir: str | None = None, local_dir: str | None = None,
                         query_name: str | None = None, max_records: int = 10_000, standby: int = 0,
                         **state_options: Any) -> StatefulQuery:
    """Start ``df`` (a streaming DataFrame) through ``processor`` (a ``pyspark.sql.streaming.StatefulProcessor``,
    unchanged) grouped by ``key_cols``; each batch's output rows (``output_schema``: DDL or ``StructType``) go to
    ``sink(out_df, batch_id)`` once the batch's state is committed to ``repo``. Returns the ``StatefulQuery``.

    ``time_mode``: ``"None"``, ``"ProcessingTime"`` or ``"EventTime"`` (Spark's names; EventTime needs
    ``event_time_column``, a timestamp column, and takes ``watermark_delay_ms``). ``num_partitions``: None, the
    driver's store (``state_dir``, a local directory); N, partitioned state (``local_dir`` on each executor).
    ``flavour``: ``"pandas"`` (``transformWithStateInPandas``) or ``"rows"`` (``transformWithState``).
    ``initial_state``: a DataFrame with the key columns, handed to ``handleInitialState`` per key in the first batch
    of a new state. ``trigger``: ``DataStreamWriter.trigger``'s keywords (``{"processingTime": "5 seconds"}``).
    ``heartbeat``: keep batches coming when no input arrives, so that timers and TTL expiries fire
    (``blobstate.spark.stateful.driver.inputs``). ``standby``: partitioned state only, ``partitioned``'s (1: a
    warm standby copy of each partition on another host). ``state_options``: the keywords of ``register`` (driver)
    or ``partitioned`` (``snapshot_every``, ``retain``, ``work_dir``, ``log``, ``storage_options``, ...).

    Under Spark Connect the same call runs (the processor, ``sink`` and ``foreachBatch`` pickled to the server's
    Python worker; ``sink`` must not hold client-side objects), without placement; ``initial_state`` is refused
    there (``refuse_under_connect``).

    Raises ``MissingDependencyError`` (pyspark < 4.0), ``ConfigurationError`` for a bad argument,
    ``KeyGroupsUnsupported`` (exit 2, at start, nothing run or written) for ``key_groups=`` or a store that records
    key groups, ``StateSchemaError`` (exit 2, naming the variable and both schemas; before the query starts,
    nothing restored or written) when the processor's ``init``, run once on the driver, declares a state variable
    incompatibly with what the store recorded (``blobstate.spark.stateful.driver.restart``), and what opening the
    state raises (``SparkAlignmentError``, ``PartitioningError``).
    """
    require_pyspark()
    mode = canonical_time_mode(time_mode)
    if flavour not in ("pandas", "rows"):
        raise ConfigurationError(f"flavour {flavour!r}: expected 'pandas' or 'rows'")
    if mode == "EventTime" and not event_time_column:
        raise ConfigurationError("time_mode='EventTime' needs event_time_column (a timestamp column of the input)")
    if watermark_delay_ms < 0:
        raise ConfigurationError("watermark_delay_ms must be >= 0")
    spec = ProcessorSpec(tuple(key_cols), output_schema, time_mode=mode, flavour=flavour,
                         event_time_column=event_time_column if mode == "EventTime" else None,
                         max_records=max_records)
    stream = watermarked(df, event_time_column if mode == "EventTime" else None, watermark_delay_ms)
    if heartbeat:
        stream = with_heartbeat(stream)
    refuse_under_connect(df.sparkSession, initial_state=initial_state)
    initial, initial_columns = (None, ()) if initial_state is None else initial_rows(initial_state, list(key_cols))
    refuse_incompatible(processor, time_mode=mode, repo=repo, job=job, store=store,
                        partitioned=num_partitions is not None, task=state_options.get("task"),
                        log=state_options.get("log"),
                        storage_options=state_options.get("storage_options"), settings=state_options.get("settings"),
                        key_groups=state_options.get("key_groups"))
    spark = df.sparkSession
    if num_partitions is None:
        if state_dir is None:
            raise ConfigurationError("the driver's store (num_partitions=None) needs state_dir")
        if standby:
            raise ConfigurationError("standby=1 keeps standby copies of partitions: it needs num_partitions=N")
        state: Any = register(spark, repo=repo, checkpoint_location=checkpoint_location,
                              state_dir=os.path.abspath(state_dir), job=job, store=store, **state_options)
        run: Any = DriverRun(state, processor, spec, sink, initial, initial_columns)
        state.foreach_batch(run.stage)
    else:
        if local_dir is None:
            raise ConfigurationError("partitioned state (num_partitions=N) needs local_dir")
        state = partitioned(spark, repo=repo, checkpoint_location=checkpoint_location, job=job, store=store,
                            num_partitions=num_partitions, key_cols=list(key_cols), local_dir=local_dir,
                            standby=standby, **state_options)
        run = PartitionedRun(state, processor, spec, sink, initial, initial_columns)
    try:
        writer = stream.writeStream
        if trigger:
            writer = writer.trigger(**trigger)
        if num_partitions is not None:
            query = state.start(writer, query_name=query_name, batch_function=run)
        else:
            writer = writer.foreachBatch(run).option("checkpointLocation", checkpoint_location)
            query = (writer.queryName(query_name) if query_name else writer).start()
            state.bind_query(query)
    except BaseException:
        state.close()
        raise
    return StatefulQuery(query, state)


__all__ = ["StatefulQuery", "refuse_under_connect", "require_pyspark", "transform_with_state"]
