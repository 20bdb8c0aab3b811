"""A Spark Connect client (its own local server JVM on a free port, ``spark_child.connect_session``) that reads and
writes state: ``python state_connect_child.py CONFIG.json``. CONFIG: ``repo`` (holding the group ``j/group/g``),
``work``, ``local``, ``out``. Writes to ``out`` as JSON: the rows of ``read_state`` and ``read_changes`` (bytes as
hex), and the results of two ``write_state`` calls (a partitioned store ``j/group/w`` and a driver store
``j/0/d``)."""

from __future__ import annotations

import json
import sys


def _plain(row) -> dict:  # noqa: ANN001
    return {k: (v.hex() if isinstance(v, bytes | bytearray) else v) for k, v in row.asDict().items()}


def main(path: str) -> None:
    with open(path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    from spark_child import session

    from blobstate.spark import read_changes, read_state, write_state

    spark = session(True)
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    state = read_state(spark, repo=cfg["repo"], job="j", store="g", local_dir=cfg["local"])
    changes = read_changes(spark, repo=cfg["repo"], job="j", store="g", from_batch=1)
    df = spark.createDataFrame([(f"k{i}", f"k{i}", i) for i in range(50)], "part string, key string, value bigint")
    group = write_state(df, repo=cfg["repo"], job="j", store="w", num_partitions=3, key_cols=["part"],
                        work_dir=cfg["work"] + "w", local_dir=cfg["local"])
    driver = write_state(df.select("key", "value"), repo=cfg["repo"], job="j", store="d", batch_id=4,
                         work_dir=cfg["work"] + "d", local_dir=cfg["local"])
    with open(cfg["out"], "w", encoding="utf-8") as fh:
        json.dump({"schema": state.schema.simpleString(), "state": [_plain(r) for r in state.collect()],
                   "changes": [_plain(r) for r in changes.collect()], "group": group.to_json(),
                   "driver": driver.to_json()}, fh)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
