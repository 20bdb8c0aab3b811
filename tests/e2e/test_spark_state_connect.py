"""Issue 32 under Spark Connect, on a real local Connect server (a child process: a Connect session cannot share a
process with the classic one of the other tests): ``read_state`` and ``read_changes`` of a group of two partitions
whose values are of mixed types (most strings, some ints and a float: the ints ride in ``value_raw``, exactly), and
``write_state`` of a partitioned store (``mapInArrow`` after Spark's hash repartition) and of a driver store
(``toLocalIterator``), both read back without Spark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_fixtures import SUPPORT  # noqa: E402

import blobstate  # noqa: E402
from blobstate.commit.backup import StoreCommitter  # noqa: E402
from blobstate.commit.group import GroupCommitter  # noqa: E402
from blobstate.model import changelog  # noqa: E402
from blobstate.model.layout import DEFAULT_TTL_MS  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.restoring import entries  # noqa: E402
from blobstate.worker import stage_changelog  # noqa: E402


def _ops(batch: int, partition: int) -> list[changelog.Op]:
    values = [f"text-{batch}", f"more-{batch}", f"again-{batch}", batch, 0.5 + batch]  # mostly str
    return [(changelog.PUT, f"p{partition}-{i}", v) for i, v in enumerate(values)] + (
        [(changelog.DELETE, f"p{partition}-1", None)] if batch == 2 else [])


def test_read_and_write_state_under_spark_connect(tmp_path):
    repo, key = f"file://{tmp_path}/repo", StoreKey("j", "group", "g")
    with StoreCommitter(key, repo, work_dir=str(tmp_path / "writer")) as committer:
        groups = GroupCommitter(committer, num_partitions=2)
        for batch in range(3):
            groups.commit([stage_changelog(committer.repo, key, partition=p, batch_id=batch,
                                           data=changelog.encode(_ops(batch, p)), ttl_ms=DEFAULT_TTL_MS)
                           for p in (0, 1)], batch_id=batch, query_id="q")
    config, out = tmp_path / "child.json", tmp_path / "out.json"
    config.write_text(json.dumps({"repo": repo, "work": str(tmp_path / "work-"), "local": str(tmp_path / "local"),
                                  "out": str(out)}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]),
               SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    child = subprocess.Popen([sys.executable, os.path.join(SUPPORT, "state_connect_child.py"), str(config)], env=env,
                             start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = child.communicate(timeout=300)
    finally:
        try:
            os.killpg(child.pid, signal.SIGKILL)  # whatever is left of its group (the server's JVM)
        except ProcessLookupError:
            pass
    assert child.returncode == 0, err[-3000:]
    got = json.loads(out.read_text())

    assert got["schema"] == "struct<partition:int,key:string,value:string,key_raw:binary,value_raw:binary>"
    expected = {}
    for p in (0, 1):
        for k, v in blobstate.read_state(repo=repo, job="j", task="group", store="g", partition=p):
            expected[k] = (p, v)
    read = {}
    for row in got["state"]:
        value = row["value"] if row["value"] is not None else entries.decode(bytes.fromhex(row["value_raw"]))
        read[row["key"]] = (row["partition"], value)
    assert read == expected and {type(v) for _, v in read.values()} == {str, int, float}
    assert all(type(read[k][1]) is type(v) for k, (_, v) in expected.items())
    assert sorted({(c["batch_id"], c["partition"]) for c in got["changes"]}) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert [c["op"] for c in got["changes"] if c["partition"] == 0 and c["batch_id"] == 2][-1] == "delete"

    assert (got["group"]["partitions"], got["group"]["keys"]) == (3, 50)
    written = dict(blobstate.read_state(repo=repo, job="j", task="group", store="w"))
    assert written == {f"k{i}": i for i in range(50)}
    assert got["driver"]["partitions"] == 0 and got["driver"]["batchId"] == 4
    assert dict(blobstate.read_state(repo=repo, job="j", store="d", batch_id=4)) == written
