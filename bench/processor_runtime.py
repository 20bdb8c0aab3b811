"""Per-key cost of the stateful-processor runtime in-process (issue 41), no Spark.

``python -m bench.processor_runtime [--keys 1000000] [--rows-per-key 1] [--variants full,rows,state,frames]
[--out FILE]``

On a real RocksDB (rocksdict, the partitions' options) in a temporary directory:

- **encoding**: one state value ``(n,)`` / ``(n, "abc", 1.5)`` as msgpack through msgspec (the runtime's encoding)
  and as one Arrow IPC stream message (the alternative), per value both ways, and its bytes;
- **load**: one batch with every key once (``--keys`` keys, new state), committed (changelog encoded, the
  ``WriteBatch`` applied);
- **steady**: the same keys again, ``--rows-per-key`` rows each (every key read, updated and written), per
  variant: ``full`` (the running count, pandas flavour: frames built, state read and written, a one-row frame
  out), ``rows`` (the same in the rows flavour), ``state`` (state get/update per key, the rows never iterated,
  nothing emitted), ``frames`` (the frames built and counted, no state, nothing emitted).

Reported per variant: the batch's wall time and per key (µs), split as ``run_batch`` reports it (``group``:
Arrow sort and key boundaries, pandas conversion of the batch; ``input``: per-key frames/rows, the user's calls and
the state calls; ``output``: emitted frames to Arrow), plus the changelog encoding and the RocksDB apply.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(HERE))


def encoding(n: int = 200_000) -> dict[str, Any]:
    """µs per value and bytes, msgspec msgpack vs Arrow IPC, for two value shapes."""
    import msgspec
    import pyarrow as pa

    out: dict[str, Any] = {}
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder()
    for label, value, schema in (("(n,)", [0, None, 12345], pa.schema([("n", pa.int64())])),
                                 ("(n, s, f)", [0, None, 12345, "abc", 1.5],
                                  pa.schema([("n", pa.int64()), ("s", pa.string()), ("f", pa.float64())]))):
        t = time.perf_counter()
        for _ in range(n):
            data = enc.encode(value)
        enc_us = (time.perf_counter() - t) / n * 1e6
        t = time.perf_counter()
        for _ in range(n):
            dec.decode(data)
        dec_us = (time.perf_counter() - t) / n * 1e6
        row = {name: value[2 + i] for i, name in enumerate(schema.names)}
        m = max(1, n // 100)
        t = time.perf_counter()
        for _ in range(m):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, schema) as writer:
                writer.write_batch(pa.RecordBatch.from_pylist([row], schema=schema))
            ipc = sink.getvalue()
        ipc_enc_us = (time.perf_counter() - t) / m * 1e6
        t = time.perf_counter()
        for _ in range(m):
            pa.ipc.open_stream(ipc).read_all().to_pylist()
        ipc_dec_us = (time.perf_counter() - t) / m * 1e6
        out[label] = {"msgpack_encode_us": round(enc_us, 3), "msgpack_decode_us": round(dec_us, 3),
                      "msgpack_bytes": len(data), "arrow_ipc_encode_us": round(ipc_enc_us, 1),
                      "arrow_ipc_decode_us": round(ipc_dec_us, 1), "arrow_ipc_bytes": ipc.size}
    return out


def processors() -> dict[str, Any]:
    import pandas as pd
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class Full(StatefulProcessor):
        def init(self, handle):
            self.count = handle.getValueState("count", "n long")

        def handleInputRows(self, key, rows, timerValues):
            n = (self.count.get()[0] if self.count.exists() else 0) + sum(len(pdf) for pdf in rows)
            self.count.update((n,))
            yield pd.DataFrame({"k": [key[0]], "n": [n]})

    class Rows(StatefulProcessor):
        def init(self, handle):
            self.count = handle.getValueState("count", "n long")

        def handleInputRows(self, key, rows, timerValues):
            current = self.count.get()
            n = (current[0] if current else 0) + sum(1 for _ in rows)
            self.count.update((n,))
            yield Row(k=key[0], n=n)

    class State(StatefulProcessor):
        def init(self, handle):
            self.count = handle.getValueState("count", "n long")

        def handleInputRows(self, key, rows, timerValues):
            current = self.count.get()
            self.count.update(((current[0] if current else 0) + 1,))
            return iter(())

    class Frames(StatefulProcessor):
        def init(self, handle):
            self.rows = 0

        def handleInputRows(self, key, rows, timerValues):
            self.rows += sum(len(pdf) for pdf in rows)
            return iter(())

    return {"full": (Full, "pandas"), "rows": (Rows, "rows"), "state": (State, "pandas"),
            "frames": (Frames, "pandas")}


def batch(keys: int, rows_per_key: int, seed: int) -> Any:
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(keys), rows_per_key)
    rng.shuffle(ids)
    names = pa.array(np.char.add("key-", ids.astype(str)))
    return pa.table({"k": names, "v": pa.array(rng.integers(0, 1000, len(ids)))})


def run_one(db: Any, make: Any, flavour: str, data: Any, batch_id: int, at: int) -> dict[str, Any]:
    from blobstate.model import changelog
    from blobstate.spark.processor import BatchTimes, ProcessorSpec, run_batch

    view = changelog.StagedWrites(db)
    spec = ProcessorSpec(("k",), "k string, n long", flavour=flavour)
    t0 = time.perf_counter()
    result = run_batch(make(), view, data, spec, BatchTimes(batch_id, at))
    t1 = time.perf_counter()
    ops = view.ops()
    blob = changelog.encode(ops)
    t2 = time.perf_counter()
    changelog.apply_ops(db, ops)
    t3 = time.perf_counter()
    keys = max(result.stats.keys, 1)
    phases = {k: round(v, 1) for k, v in result.stats.ms.items()}
    return {"keys": result.stats.keys, "rows": result.stats.rows_in, "rows_out": result.stats.rows_out,
            "writes": len(ops), "run_batch_ms": round((t1 - t0) * 1000, 1), "phases_ms": phases,
            "per_key_us": {"run_batch": round((t1 - t0) / keys * 1e6, 2),
                           **{k: round(v * 1000 / keys, 2) for k, v in result.stats.ms.items() if k != "total"},
                           "changelog_encode": round((t2 - t1) / keys * 1e6, 2),
                           "rocksdb_apply": round((t3 - t2) / keys * 1e6, 2)},
            "changelog_bytes": len(blob)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--rows-per-key", type=int, default=1)
    parser.add_argument("--variants", default="full,rows,state,frames")
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    from rocksdict import Rdict

    from blobstate.spark.executor.open_partitions import db_options

    report: dict[str, Any] = {"keys": args.keys, "rows_per_key": args.rows_per_key, "encoding": encoding()}
    print(json.dumps(report["encoding"], indent=1), flush=True)
    procs = processors()
    load = batch(args.keys, 1, seed=1)
    steady = batch(args.keys, args.rows_per_key, seed=2)
    for name in args.variants.split(","):
        make, flavour = procs[name]
        work = tempfile.mkdtemp(prefix="bench-processor-", dir=args.work)
        try:
            db = Rdict(os.path.join(work, "db"), db_options())
            loaded = run_one(db, make, flavour, load, 0, 1_000)
            stead = run_one(db, make, flavour, steady, 1, 2_000)
            db.close()
        finally:
            shutil.rmtree(work, ignore_errors=True)
        report[name] = {"load": loaded, "steady": stead}
        print(name, json.dumps(report[name]), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
