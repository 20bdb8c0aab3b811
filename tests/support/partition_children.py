"""Test children of a partitioned store without Spark, each a real process: the executors' side runs the real
``blobstate.spark.partitioned.executor.batch_task.run_partition`` (what a Spark task runs, Spark-agnostic but for the
task context), the driver's side the real ``GroupCommitter`` with the parts the executors staged (it holds none of their
bytes, as a Spark driver).

``python partition_children.py CONFIG_JSON``, CONFIG ``{"url", "options", "job", "task", "store", "ttl_ms",
"partitions", "batch", "local_dir", "work_dir"}``: one micro-batch, as Spark runs it: every partition's task of
batch ``batch`` on the committed records (each partition writes ``p<partition>-b<batch>``; the executors' disks
under ``local_dir``), then the driver's one group commit of their parts (its work directory ``work_dir``); prints
``{"generation"}``. A negative ``batch``: only the driver's recovery of its work directory.
"""

from __future__ import annotations

import json
import sys

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.model.chain import partition_history
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
from blobstate.spark.partitioned.executor.batch_task import BatchPlan, run_partition


def micro_batch(config: dict, key: StoreKey) -> None:
    repo = Repository.open(config["url"], storage_options=config.get("options") or {}, create=True)
    if config["batch"] < 0:  # recovery of the driver's work directory only (what its next start runs first)
        StoreCommitter(key, repo, work_dir=config["work_dir"], ttl_ms=config["ttl_ms"]).close()
        repo.close()
        return
    history = repo.log.history(key)
    batch, n = config["batch"], config["partitions"]
    plan = BatchPlan(repo=config["url"], key=key, local_dir=config["local_dir"], num_partitions=n, batch_id=batch,
                     base=history[-1].generation if history else 0, upto=batch - 1 if batch else None,
                     records={p: tuple(partition_history(history, p)) for p in range(n)},
                     storage_options=config.get("options") or {}, ttl_ms=config["ttl_ms"])

    def update(view, rows, ctx):  # noqa: ANN001, ANN202
        for row in rows:
            view[row] = f"v{ctx.batch_id}"

    prepares = [prepare for p in range(n) for prepare in run_partition(plan, update, p, [f"p{p}-b{batch}"])]
    with StoreCommitter(key, repo, work_dir=config["work_dir"], ttl_ms=config["ttl_ms"]) as committer:
        cp = GroupCommitter(committer, num_partitions=n).commit(
            [p.entry for p in prepares], batch_id=batch, query_id="q", created_ms=min(p.created_ms for p in prepares))
    print(json.dumps({"generation": cp.generation}), flush=True)
    repo.close()


if __name__ == "__main__":
    conf = json.loads(sys.argv[1])
    micro_batch(conf, StoreKey(conf["job"], conf["task"], conf["store"]))
