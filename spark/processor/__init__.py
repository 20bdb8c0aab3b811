"""The stateful-processor runtime: Spark's ``StatefulProcessor`` model (``transformWithStateInPandas`` /
``transformWithState``, pyspark >= 4.0) run on one partition's RocksDB, with local state calls, Spark-agnostic
(pyspark is needed only for a user's ``StructType``, and for pyspark's ``Row`` when installed).

Design note (read from pyspark 4.3's ``stateful_processor*.py``, ``*_state_client.py``, ``worker.py``'s
transformWithState paths and ``group_ops.py``, and Spark's ``TransformWithStateExec``,
``StatefulProcessorHandleImpl``, ``TimerStateImpl``, ``TTLState``/``*WithTTL``, ``TimerValuesImpl`` and the state
data source guide):

* The API. Handle: ``getValueState(name, schema, ttlDurationMs=None)``, ``getListState(...)``,
  ``getMapState(name, userKeySchema, valueSchema, ttlDurationMs=None)``, ``registerTimer(ms)``,
  ``deleteTimer(ms)``, ``listTimers()``, ``deleteIfExists(name)``; schemas a DDL string or ``StructType``.
  ``ValueState`` ``exists/get/update/clear``; ``ListState`` ``exists/get/put/appendValue/appendList/clear``;
  ``MapState`` ``exists/getValue/containsKey/updateValue/iterator/keys/values/removeKey/clear``;
  ``TimerValues.getCurrentProcessingTimeInMs/getCurrentWatermarkInMs``; ``ExpiredTimerInfo.getExpiryTimeInMs``.
  pyspark's Python handle has no ``getQueryInfo`` (Scala's has: query id, run id, batch id); ours adds it.
* The flavours differ only at the edges: the pandas flavour hands ``handleInputRows`` an iterator of DataFrames
  (all input columns, chunked at ``maxRecordsPerBatch``) and takes DataFrames back (columns by name); the rows
  flavour hands ``Row``s and takes ``Row``s (by field name); ``handleInitialState`` gets one DataFrame chunk, or one
  Row, per call. The state calls are the same client in both: ``ValueState.get()`` a plain tuple or None,
  ``ListState.get()`` an iterator of tuples, ``MapState.getValue()`` the unpickled ``Row``, ``iterator()``
  ``(key tuple, value tuple)`` pairs. The key is a tuple of Python scalars in both.
* TTL: only in the ProcessingTime mode (Spark refuses it elsewhere); None or 0 is no TTL, negative an error; a
  write sets ``expiry = batch timestamp + ttl`` (per list element, per map user key); expired when ``batch
  timestamp >= expiry``, never returned from then on; Spark removes expired values at the end of the batch through a
  secondary index ordered by expiry. ``get`` does not extend a TTL.
* Order of a batch: ``init`` (per partition per batch), ``handleInitialState`` per key (first batch only) before
  that key's input, ``handleInputRows`` per key, then the timers due (processing time: the batch timestamp;
  event time: the watermark for eviction; ``expiry <= threshold``, in time order; the timer is deleted after its
  handler's output is consumed), then ``close``, then the TTL cleanup, then the commit. Timers need a time mode
  other than None; ``TimerValues`` are -1 in time mode None. In EventTime mode input rows at or below the
  previous batch's watermark are dropped as late; the watermark of batch N is ``max event time - delay`` over the
  batches before N. Processing time and watermark come from Spark's offset log, so a re-run sees the same ones.

Choices: key spaces are prefixes of one column family, not RocksDB column families (the changelog, its replay and
every restore carry scalar keys of one family; a prefix isolates a variable as well: ``store``). Grouping keys and
user keys are encoded order-preserving and prefix-free (``codec``); values are msgpack arrays through msgspec (about
a microsecond a value; Arrow IPC costs hundreds of microseconds and ~500 bytes a value) carrying their schema
version and expiry, so a nullable field added later reads as None. A list is one record (Spark's merge operator
keeps one RocksDB value per key too). The TTL index and both timer indexes are written in the same staged batch
as what they index (``ttl``, ``timers``). The timers due are a snapshot taken when timer processing starts (a timer
registered by a handler fires in a later batch, as a RocksDB iterator would not see it); one deleted by an
earlier handler of the same batch is skipped. Schemas are read without a JVM (``schema``: pyspark parses DDL only
through one); the store records them (``metadata``) and a restart that changes them incompatibly is refused
before any write.

Modules (its errors, ``StateVariableError`` and ``StateSchemaError``, are in ``blobstate.spark.errors``): ``schema``,
``codec``, ``store``, ``metadata``, ``ttl``, ``timers``, ``state`` (the three state variables), ``handle`` (handle,
timer values, runtime context), ``rows``, ``grouping`` (Arrow grouping, per-key inputs), ``output`` (emitted rows to
Arrow), ``runner`` (``run_batch``: one batch), ``readers`` (state as data). Spark-agnostic, it runs inside a
partition's task: it may import ``blobstate.spark.errors`` and the core's model (its driver side, when it has one,
builds on ``blobstate.spark.partitioned``).
"""

from blobstate.spark.errors import StateSchemaError, StateVariableError
from blobstate.spark.processor.readers import StateReader
from blobstate.spark.processor.runner import (
    BatchResult,
    BatchStats,
    BatchTimes,
    ProcessorSpec,
    advance_watermark,
    run_batch,
)

__all__ = ["BatchResult", "BatchStats", "BatchTimes", "ProcessorSpec", "StateReader", "StateSchemaError",
           "StateVariableError", "advance_watermark", "run_batch"]
