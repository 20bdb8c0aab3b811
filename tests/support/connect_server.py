"""A Spark Connect server to share between the tests of a module: ``python connect_server.py``. It starts a server
in its own JVM (``spark_child.start_server``: ``local[2]``, loopback, port 0, the token of
``SPARK_CONNECT_AUTHENTICATE_TOKEN``), prints ``port N`` once bound, and serves until its stdin closes. Clients are
children of their own (``stateful_connect_child.py``): a Connect client cannot share a process with the classic
session of the other tests."""

from __future__ import annotations

import sys

from spark_child import start_server


def main() -> None:
    port = start_server({"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2",
                         "spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
                         "spark.sql.session.timeZone": "UTC"})
    print(f"port {port}", flush=True)
    sys.stdin.read()  # until the fixture closes it


if __name__ == "__main__":
    main()
