"""A moto S3 server in its own process that counts the requests it answers, by kind.

``python -m bench.s3server PORT`` serves moto on 127.0.0.1:PORT. ``GET /__bench__/counts`` returns the counts
since the last ``POST /__bench__/reset`` as JSON (``{"GET": n, "PUT": n, "LIST": n, "HEAD": n, "DELETE": n,
"POST": n, "total": n}``); ``POST /__bench__/put`` writes objects straight into moto's backend, uncounted
(``S3Server.put_direct``: a benchmark's fixture data); ``GET /__bench__/log`` returns every request since then,
in arrival order, as ``[kind, method, path, query, start_s, end_s]`` (the server's monotonic clock: when the
request arrived and when its answer was ready, before it was sent), for ``bench.requests``' critical-path depth;
``PORT LATENCY_MS`` answers every request LATENCY_MS later (an emulated round trip, so that requests a client
sends at once overlap at the server as they would on a real service). ``S3Server`` starts it from the harness,
waits until it answers, and stops it by PID.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

ADMIN = "/__bench__/"
ACCESS_KEY = "bench"  # moto accepts any credentials; these are not secrets
SECRET_KEY = "bench-secret"
REGION = "us-east-1"


def _kind(environ: dict[str, Any]) -> str:
    method = environ.get("REQUEST_METHOD", "GET")
    path = environ.get("PATH_INFO", "/").strip("/")
    query = environ.get("QUERY_STRING", "")
    if method == "GET" and ("/" not in path or "list-type" in query):
        return "LIST"
    return method


class CountingApp:
    """WSGI middleware: count and log each request by kind, answer the admin paths, pass the rest to moto."""

    def __init__(self, app: Callable[..., Iterable[bytes]], latency_s: float = 0.0) -> None:
        self.app = app
        self.latency_s = latency_s
        self.counts: Counter[str] = Counter()
        self.log: list[list[Any]] = []  # [kind, method, path, query, start_s, end_s or None]
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == ADMIN + "put":
            return self._put_direct(environ, start_response)
        if path.startswith(ADMIN):
            with self.lock:
                if path.endswith("reset"):
                    self.counts.clear()
                    self.log.clear()
                answer = self.log if path.endswith("log") else {**self.counts, "total": sum(self.counts.values())}
                body = json.dumps(answer).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        entry = [_kind(environ), environ.get("REQUEST_METHOD", "GET"), path, environ.get("QUERY_STRING", ""),
                 time.monotonic(), None]
        with self.lock:
            self.counts[entry[0]] += 1
            self.log.append(entry)
        try:
            if self.latency_s:
                time.sleep(self.latency_s)  # an emulated round trip: what a request costs on a real service
            return self.app(environ, start_response)
        finally:
            entry[5] = time.monotonic()  # moto has the whole answer now: a client's next request comes after it

    def _put_direct(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """``POST /__bench__/put`` with ``{"bucket": name, "objects": {key: base64 bytes}}``: the objects written
        straight into moto's backend (the bucket created if missing), not counted: how a benchmark fills a
        repository with thousands of stores in seconds instead of one PUT each."""
        import base64

        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        size = int(environ.get("CONTENT_LENGTH") or 0)
        doc = json.loads(environ["wsgi.input"].read(size))
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
        try:
            backend.get_bucket(doc["bucket"])
        except Exception:  # noqa: BLE001 - moto's MissingBucket: create it
            backend.create_bucket(doc["bucket"], REGION)
        for key, data in doc["objects"].items():
            backend.put_object(doc["bucket"], key, base64.b64decode(data))
        body = json.dumps({"written": len(doc["objects"])}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def serve(port: int, latency_ms: float = 0.0) -> None:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = CountingApp(DomainDispatcherApplication(create_backend_app), latency_ms / 1000)
    make_server("127.0.0.1", port, app, threaded=True).serve_forever()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_env() -> dict[str, str]:
    """Environment for S3 clients (boto3/s3fs, restic, rclone) talking to the server."""
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION}


class S3Server:
    """The counting moto server as a child process on a free port; ``stop()`` ends it by its PID."""

    def __init__(self, log_path: str, startup_timeout_s: float = 30.0, latency_ms: float = 0.0) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "ab")
        env = {**os.environ, **client_env()}
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.s3server", str(self.port), str(latency_ms)],
                                     stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + startup_timeout_s
        while True:
            try:
                self.counts(reset=True)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto server did not start on port {self.port} (see {log_path})") from None
                time.sleep(0.05)  # polling for readiness, bounded by the deadline

    def counts(self, *, reset: bool = False) -> dict[str, int]:
        """Requests answered since the last reset, by kind; with ``reset`` also start counting afresh."""
        req = urllib.request.Request(self.endpoint + ADMIN + ("reset" if reset else "counts"),
                                     method="POST" if reset else "GET")
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def log(self) -> list[list[Any]]:
        """Every request answered since the last reset: ``[kind, method, path, query, start_s, end_s]``."""
        with urllib.request.urlopen(self.endpoint + ADMIN + "log", timeout=5) as resp:
            return json.loads(resp.read())

    def put_direct(self, bucket: str, objects: dict[str, bytes]) -> None:
        """Write ``objects`` into ``bucket`` straight into the server's backend (``/__bench__/put``: not counted)."""
        import base64

        body = json.dumps({"bucket": bucket, "objects": {k: base64.b64encode(v).decode() for k, v in
                                                          objects.items()}}).encode()
        req = urllib.request.Request(self.endpoint + ADMIN + "put", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as resp:
            resp.read()

    def fs(self) -> Any:
        """A fresh s3fs filesystem on this server (no listing cache carried between calls)."""
        import s3fs

        return s3fs.S3FileSystem(key=ACCESS_KEY, secret=SECRET_KEY, endpoint_url=self.endpoint,
                                 skip_instance_cache=True, use_listings_cache=False)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


if __name__ == "__main__":
    serve(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
