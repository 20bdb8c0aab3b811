"""A loopback TCP proxy in front of one Kafka broker that reads Kafka's framing, to lose answers on purpose.

Kafka's wire protocol frames every request and response with a 4-byte length; a request starts with its API key
(int16), API version (int16) and correlation id (int32), a response with the correlation id. The proxy forwards
frames both ways and can, per API key:

- ``cut(*api_keys)``: forward the request, wait for the broker's answer (so the broker has applied it), drop the
  answer and close both sides of the connection: the client sees a broken connection;
- ``swallow(*api_keys)``: the same, but keep the connection open: the client times out on its own;
- ``hold_next(api_key, on_hold)``: keep the next such request from the broker until ``release()``, after calling
  ``on_hold`` (a test SIGSTOPs the client there).

``seen`` counts the requests by API key (``PRODUCE``, ``INIT_PRODUCER_ID``, ``END_TXN``...), which tells a test
which path a client took. The broker must advertise the proxy's port (``advertised.listeners``), or clients would
connect to it directly after the first metadata answer. Threads only; nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
END_TXN = 26


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


class Gate:
    """One held request: ``held`` is set once it arrived (after ``on_hold`` ran), ``release()`` lets it go."""

    def __init__(self, api_key: int, on_hold: Callable[[], None] | None) -> None:
        self.api_key = api_key
        self.on_hold = on_hold
        self.held = threading.Event()
        self._released = threading.Event()

    def wait_held(self, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``) until the request is being held."""
        return self.held.wait(timeout_s)

    def release(self) -> None:
        self._released.set()


class _Connection:
    def __init__(self, proxy: KafkaProxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = socket.create_connection(("127.0.0.1", proxy.target_port), timeout=10)
        self.upstream.settimeout(None)
        self.lost: dict[int, bool] = {}  # correlation id -> close the connection when its answer comes
        self.lock = threading.Lock()

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def requests(self) -> None:
        while (frame := _read_frame(self.client)) is not None:
            api_key, _, correlation = struct.unpack(">hhi", frame[4:12])
            gate = self.proxy._take_gate(api_key)
            if gate is not None:
                if gate.on_hold is not None:
                    gate.on_hold()
                gate.held.set()
                gate._released.wait(120)
            mode = self.proxy._mode(api_key)
            if mode is not None:
                with self.lock:
                    self.lost[correlation] = mode == "cut"
            try:
                self.upstream.sendall(frame)
            except OSError:
                break
        self.close()

    def responses(self) -> None:
        while (frame := _read_frame(self.upstream)) is not None:
            (correlation,) = struct.unpack(">i", frame[4:8])
            with self.lock:
                cut = self.lost.pop(correlation, None)
            if cut is True:
                break  # the broker answered: drop the answer and the connection
            if cut is False:
                continue  # swallowed: the client waits until its own timeout
            try:
                self.client.sendall(frame)
            except OSError:
                break
        self.close()


class KafkaProxy:
    """Listens on ``127.0.0.1:port`` and forwards to ``127.0.0.1:target_port`` (see the module docstring)."""

    def __init__(self, target_port: int, port: int = 0) -> None:
        self.target_port = target_port
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.seen: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._modes: dict[int, str] = {}
        self._gates: list[Gate] = []  # waiting for their request
        self._every_gate: list[Gate] = []  # released on close, held or not
        self._connections: list[_Connection] = []
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="kafka-proxy", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                conn = _Connection(self, client)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections.append(conn)
            threading.Thread(target=conn.requests, daemon=True).start()
            threading.Thread(target=conn.responses, daemon=True).start()

    def _take_gate(self, api_key: int) -> Gate | None:
        with self._lock:
            self.seen[api_key] += 1
            for gate in self._gates:
                if gate.api_key == api_key:
                    self._gates.remove(gate)
                    return gate
        return None

    def _mode(self, api_key: int) -> str | None:
        with self._lock:
            return self._modes.get(api_key)

    def cut(self, *api_keys: int) -> None:
        """Until ``disarm()``: forward these requests, then drop their answers and break the connection."""
        with self._lock:
            self._modes.update({k: "cut" for k in api_keys})

    def swallow(self, *api_keys: int) -> None:
        """Until ``disarm()``: forward these requests, then drop their answers (the connection stays open)."""
        with self._lock:
            self._modes.update({k: "swallow" for k in api_keys})

    def hold_next(self, api_key: int, on_hold: Callable[[], None] | None = None) -> Gate:
        """Hold the next request with ``api_key`` before the broker sees it, until the gate is released."""
        gate = Gate(api_key, on_hold)
        with self._lock:
            self._gates.append(gate)
            self._every_gate.append(gate)
        return gate

    def disarm(self) -> None:
        """Forward everything again (held requests stay held until released)."""
        with self._lock:
            self._modes.clear()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            gates, self._gates = self._every_gate, []
            connections, self._connections = self._connections, []
        for gate in gates:
            gate.release()
        for conn in connections:
            conn.close()
