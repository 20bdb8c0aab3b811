"""A Spark driver on the namespace cluster (``spark_cluster.py``) that hears decommissions, for
``tests/e2e/test_spark_decommission.py``.

``python decommission_child.py CONFIG.json``. CONFIG: ``conf`` (the driver's Spark conf), ``executors`` (wait for that
many), ``release`` (a file path). Prints ``READY <executor locations, comma-separated>``, then ``HEARD <executor>``
each time its ``DecommissionWatcher`` calls back, and answers commands read from stdin, one a line:
- ``BLOCK <executor>``: a one-task job placed on that executor whose task writes ``<release>.started`` (its
  hostname) and waits for the ``release`` file (it keeps the executor busy); prints ``RELEASED`` when it finished.
- ``PROBE <executor> <n>``: a job of ``n`` tasks all preferring that executor; prints ``PROBED <hostnames>``.
- ``LEAVING``: prints ``LEAVING <leaving(sc), comma-separated>``.
- ``STOP``: stops the watcher and Spark, prints ``DONE``, exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import threading


def main(path: str) -> int:
    with open(path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    from spark_cluster import driver_session, wait_until

    from blobstate.spark.placement.coordinator import SparkPlacement
    from blobstate.spark.placement.decommission import leaving, watch

    spark = driver_session(cfg, "blobstate-decommission-test")
    sc = spark.sparkContext
    placement = SparkPlacement(sc, 1)
    assert placement.available, "the JVM helper is needed"
    # an executor registers with the scheduler before its block manager does, where the helper finds it
    wait_until(lambda: len(placement.live_executors()) >= cfg["executors"], timeout_s=120,
               what=f"{cfg['executors']} executors with their block managers")
    out_lock = threading.Lock()

    def say(line: str) -> None:
        with out_lock:
            print(line, flush=True)

    say("READY " + ",".join(sorted(placement.live_executors())))
    watcher = watch(sc, lambda executor: say(f"HEARD {executor}"))
    release = cfg["release"]

    def blocking_task(_index, _rows):
        import socket
        import time

        with open(release + ".started", "w", encoding="utf-8") as fh:
            fh.write(socket.gethostname())
        deadline = time.monotonic() + 600
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling for the test's release file: the file decides
        yield socket.gethostname()

    def block(executor: str) -> None:
        rdd = placement.place(sc.parallelize([0], 1), [executor])
        rdd.mapPartitionsWithIndex(blocking_task).collect()
        say("RELEASED")

    def where(_index, _rows):
        import socket

        yield socket.gethostname()

    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "BLOCK":
            threading.Thread(target=block, args=(words[1],), daemon=True).start()
        elif words[0] == "PROBE":
            n = int(words[2])
            rdd = placement.place(sc.parallelize(list(range(n)), n), [words[1]] * n)
            say("PROBED " + ",".join(rdd.mapPartitionsWithIndex(where).collect()))
        elif words[0] == "LEAVING":
            say("LEAVING " + ",".join(sorted(leaving(sc))))
        elif words[0] == "STOP":
            break
    watcher.stop()
    spark.stop()
    say("DONE")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
