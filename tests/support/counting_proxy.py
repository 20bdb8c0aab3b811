"""A counting HTTP reverse proxy on 127.0.0.1, for tests that must count requests at the server.

``CountingProxy(upstream)`` forwards every request (method, path, query, headers, body) to ``upstream`` (an
emulator's ``http://127.0.0.1:PORT``) and records ``(method, path, query)`` of each before answering; a test points
its client at ``proxy.endpoint`` and reads ``proxy.requests``. It runs in a thread of the test process and is
stopped with ``close()`` (or as a context manager).

``RefusingListener()`` accepts TCP connections and closes them at once, counting them: a server that is "there"
but never answers, to count a client's connection attempts.
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}


class CountingProxy:
    """Reverse proxy to ``upstream`` that records every request as ``(method, path, query)``."""

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream_host, self.upstream_port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.requests: list[tuple[str, str, str]] = []
        self.post_bodies: list[tuple[str, bytes]] = []  # (path?query, body) of each POST (bulk deletes name keys)
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _forward(self) -> None:
                path, _, query = self.path.partition("?")
                with proxy._lock:
                    proxy.requests.append((self.command, path, query))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if self.command == "POST":
                    with proxy._lock:
                        proxy.post_bodies.append((self.path, body or b""))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in HOP_HEADERS and k.lower() != "content-length":
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _forward  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def count(self, method: str, *, query_has: str = "") -> int:
        """Requests with ``method`` whose query string contains ``query_has``."""
        with self._lock:
            return sum(1 for m, _p, q in self.requests if m == method and query_has in q)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.post_bodies.clear()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> CountingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RefusingListener:
    """A loopback TCP listener that accepts each connection, counts it and closes it without a byte."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = int(self._sock.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> RefusingListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def emulator_endpoint(target: Any) -> str:
    """The emulator's endpoint a ``cloud_servers.CloudTarget``'s options point at (moto or azurite)."""
    if target.name == "s3":
        return str(target.storage_options["endpoint_url"])
    return str(target.storage_options["connection_string"].split("BlobEndpoint=")[1].split("/devstoreaccount1")[0])


def options_through(target: Any, proxy: CountingProxy) -> dict[str, str]:
    """The environment that makes a command reach ``target``'s emulator through ``proxy``."""
    import json

    if target.name == "s3":
        options = {**target.storage_options, "endpoint_url": proxy.endpoint}
    else:
        options = {"connection_string": target.storage_options["connection_string"].replace(
            emulator_endpoint(target), proxy.endpoint)}
    return {"BLOBSTATE_STORAGE_OPTIONS": json.dumps(options)}
