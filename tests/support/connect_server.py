"""A Spark Connect server to share between the tests of a module: ``python connect_server.py``. It starts a server
in its own JVM (``spark_child.start_server``: ``local[2]``, loopback, port 0, the token of
``SPARK_CONNECT_AUTHENTICATE_TOKEN``), prints ``port N`` once bound, and serves until its stdin closes. Clients are
children of their own (``stateful_connect_child.py``): a Connect client cannot share a process with the classic
session of the other tests."""

from __future__ import annotations

import sys

from spark_child import start_server

# the servers of the processor tests (this module's and ``stateful_connect_child``'s own). A Python worker the server
# starts (``foreachBatch``'s) must connect back within Spark's fixed 10 s (``PythonWorkerFactory``, not a setting): on
# a machine loaded far past its cores it may not ("Python worker failed to connect back", a query never started)
CONF = {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1", "spark.sql.session.timeZone": "UTC"}


def main() -> None:
    port = start_server(CONF)
    print(f"port {port}", flush=True)
    sys.stdin.read()  # until the fixture closes it


if __name__ == "__main__":
    main()
