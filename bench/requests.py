"""Requests per commit on S3: every request of one commit of each kind, counted at a moto server, with its
critical-path depth.

``python -m bench.requests [--out bench/results/requests.json] [--keys 20000] [--size 16MiB]`` starts the counting
moto server (``bench/s3server.py``: a WSGI middleware logs each request's kind, method, path, query and the
server's times of arrival and answer) and measures, in TTL mode ``native`` (S3 object tags) and ``lease`` (a
lease object per blob), with the file checkpoint log in the bucket:

- **snapshot**: a 1% incremental backup of a RocksDB store, the whole in-process verb (``blobstate.api.backup``:
  the repository opened, the journal recovered, the commit), after a full backup and 4 incrementals of the same
  store (retention, keeping 3, drops one snapshot: the steady state), the one before it by another such verb on
  this host (its records and indexes in this host's object cache, ``blobstate.local.object_cache``);
- **snapshot-cold**: that one before it, whose process found nothing in the object cache (removed before it: as
  on a host that did not write the store's last commits);
- **snapshot-open**: the same 1% commit by a committer that is already open and committed 3 before (a driver's
  background snapshot);
- **delta**: one delta commit (``DeltaCommitter.commit_changelog``) of a committer that committed one before, of
  100 keys (a changelog under ``MAX_INLINE_CHANGELOG_BYTES``: carried in the record);
- **delta-blob**: the same with a changelog above that bound (52 KiB): its own blob, with a TTL;
- **group**: the driver's commit of one group of N=4 changelog parts (``GroupCommitter.commit``) after one group
  before it; the parts' uploads, which executors make, are counted apart (``staging``).

Per commit it reports the requests, their kinds, and the **critical-path depth**: the longest chain of requests
each of which began after the one before it ended (``depth``): what the commit costs in round trips when every
request takes the same time. The server adds ``--latency-ms`` (default 20) to every request, so that requests a
client sends at once overlap there as on a real service; a chain of requests that did not overlap could still be
requests sent at once that the client's own threads serialized: the depth measured is an upper bound of the depth
the code allows, and the wall time (ms) is about depth x latency.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

RESULTS = os.path.join(os.path.dirname(__file__), "results", "requests.json")
PARTITIONS = 4
LATENCY_MS = 20.0  # the emulated round trip of every request (the issue saw ~30 ms a request on the local server)
WARM_COMMITS = 3  # commits before the one measured (the default retention keeps 3 snapshots)
MODES = ("native", "lease")


@dataclass(frozen=True)
class Request:
    """One request the server answered: ``kind`` (GET, PUT, LIST, HEAD, DELETE, POST), method, path, query, and
    the server's monotonic times (s) of its arrival and of its answer."""

    kind: str
    method: str
    path: str
    query: str
    start: float
    end: float

    @classmethod
    def of(cls, row: Sequence[Any]) -> Request:
        kind, method, path, query, start, end = row
        return cls(kind, method, path, query, float(start), float(end if end is not None else start))

    def label(self, root: str = "") -> str:
        """``PUT <store>/blobs/<id>?tagging``: the kind, the object (a listing: its prefix) below the repository
        ``root`` (``bucket/prefix``), and the sub-resource the query names."""
        query = urllib.parse.parse_qs(self.query, keep_blank_values=True)
        path = "/".join(s for s in (self.path.strip("/"), *query.get("prefix", [])[:1]) if s)
        path = path.split(root, 1)[1] if root and root in path else path
        sub = next((name for name in SUBRESOURCES if name in query), "")
        return f"{self.kind} {path.strip('/')}{'?' + sub if sub else ''}"


SUBRESOURCES = ("tagging", "delete", "uploads", "uploadId")


def critical_path_depth(requests: Sequence[Request]) -> int:
    """The number of requests in the longest chain of ``requests`` in which each began after the previous one
    ended (0 for none): requests that overlap count once, requests one after another add up."""
    ordered = sorted(requests, key=lambda r: r.start)
    depth: list[int] = []
    for i, r in enumerate(ordered):
        depth.append(1 + max((depth[j] for j in range(i) if ordered[j].end <= r.start), default=0))
    return max(depth, default=0)


@dataclass
class Measured:
    """One commit measured: its kind, TTL mode, what it uploaded (objects), its requests and their depth, and the
    wall time of the call (ms, on a loaded machine: a hint, not a result)."""

    kind: str
    mode: str
    uploaded: int
    requests: list[Request]
    wall_ms: float
    extra: dict[str, Any] = field(default_factory=dict)
    root: str = ""  # the repository's ``bucket/prefix``: request paths are shown below it

    @property
    def depth(self) -> int:
        return critical_path_depth(self.requests)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "mode": self.mode, "objectsUploaded": self.uploaded,
                "requests": len(self.requests), "depth": self.depth,
                "byKind": dict(sorted(Counter(r.kind for r in self.requests).items())),
                "wallMs": round(self.wall_ms, 1), **self.extra,
                "sequence": [r.label(self.root) for r in sorted(self.requests, key=lambda r: r.start)]}


class Counting:
    """The server's request log around a call: ``measure(fn)`` resets it, runs ``fn`` and returns what ``fn``
    returned and the requests it caused. ``reset``/``log`` are the server's (``bench.s3server.S3Server``, or any
    object with ``counts(reset=True)`` and ``log()``)."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def measure(self, fn: Callable[[], Any]) -> tuple[Any, list[Request], float]:
        self.server.counts(reset=True)
        t0 = time.perf_counter()
        out = fn()
        wall = (time.perf_counter() - t0) * 1000
        return out, [Request.of(row) for row in self.server.log()], wall


def uploads(requests: Sequence[Request], root: str) -> int:
    """Objects written under ``blobs/`` and ``indexes/`` (single PUTs and multipart uploads, counted once)."""
    names = {r.path for r in requests if r.method in ("PUT", "POST") and "tagging" not in r.query
             and "delete" not in r.query and ("/blobs/" in r.path or "/indexes/" in r.path) and root in r.path}
    return len(names)


# -- the commits ---------------------------------------------------------------------------------------------
def make_state(db_dir: str, *, keys: int, size: int) -> None:
    """A RocksDB store of ``keys`` keys, ``size`` bytes in all (``bench.state``)."""
    from bench import state

    state.generate(db_dir, size_bytes=size, keys=keys)


def change_state(db_dir: str, *, keys: int, size: int, fraction: float = 0.01, seed: int = 2) -> None:
    from bench import state

    state.change(db_dir, fraction=fraction, keys=keys, size_bytes=size, seed=seed)


def measure_snapshot(counting: Counting, url: str, options: dict[str, Any], mode: str, work: str, *,
                     keys: int, size: int) -> list[Measured]:
    """A full backup, then the 1% incremental measured as the whole verb; then another 1% by an open committer."""
    from blobstate import api
    from blobstate.commit.backup import StoreCommitter
    from blobstate.model.records import StoreKey
    from blobstate.repository.repo import Repository

    db = os.path.join(work, "db")
    make_state(db, keys=keys, size=size)
    common = {"repo": url, "storage_options": options, "ttl_mode": mode, "work_base": os.path.join(work, "wd"),
              "store": "counts", "store_type": "rocksdb"}
    api.backup(db, **common)
    for seed in range(WARM_COMMITS):  # retention (3 kept) has a snapshot to drop from here on: the steady state
        change_state(db, keys=keys, size=size, seed=10 + seed)
        api.backup(db, **common)
    root = url.split("://", 1)[1]
    out = []
    # a host whose object cache holds nothing of the store (another host wrote it), then the next process there
    shutil.rmtree(os.path.join(work, "wd", "cache"), ignore_errors=True)
    for kind, seed, what in (("snapshot-cold", 30, "1% incremental, blobstate.backup, nothing in the object cache"),
                             ("snapshot", 2, "1% incremental, blobstate.backup after one on the same host")):
        change_state(db, keys=keys, size=size, seed=seed)
        _, reqs, wall = counting.measure(lambda: api.backup(db, **common))
        out.append(Measured(kind, mode, uploads(reqs, root), reqs, wall, {"what": what}, root))
    key = StoreKey("default", "0", "counts")
    from blobstate.repository import host

    with Repository.open(url, storage_options=options, ttl_mode=mode) as repository, \
            StoreCommitter(key, repository, store_type="rocksdb",
                           work_dir=host.work_dir(repository, key, os.path.join(work, "wd"))) as c:
        for seed in range(WARM_COMMITS):  # warm: the committer's view of the store, and what retention drops, its own
            change_state(db, keys=keys, size=size, seed=20 + seed)
            c.backup(db)
        change_state(db, keys=keys, size=size, seed=3)
        _, reqs, wall = counting.measure(lambda: c.backup(db))
    out.append(Measured("snapshot-open", mode, uploads(reqs, root), reqs, wall,
                        {"what": "1% incremental, an open StoreCommitter"}, root))
    return out


def measure_delta(counting: Counting, url: str, options: dict[str, Any], mode: str, work: str) -> list[Measured]:
    """A small delta (inline in its record), then one above the inline bound (its own blob)."""
    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.delta import DeltaCommitter
    from blobstate.model import changelog
    from blobstate.model.records import StoreKey
    from blobstate.repository.repo import Repository

    key = StoreKey("stream", "0", "deltas")
    root = url.split("://", 1)[1]
    with Repository.open(url, storage_options=options, ttl_mode=mode) as repository, \
            StoreCommitter(key, repository, work_dir=os.path.join(work, "delta-wd")) as committer:
        deltas = DeltaCommitter(committer)
        deltas.commit_changelog(changelog.encode([(changelog.PUT, "k0", "v0")]), batch_id=0, query_id="q")
        out = []
        for kind, batch, values in (("delta", 1, 100), ("delta-blob", 2, 1000)):
            data = changelog.encode([(changelog.PUT, f"k{i}", f"value-{i:032d}") for i in range(values)])
            _, reqs, wall = counting.measure(lambda d=data, b=batch: deltas.commit_changelog(d, batch_id=b,
                                                                                           query_id="q"))
            out.append(Measured(kind, mode, uploads(reqs, root), reqs, wall,
                                {"what": f"one delta of an open committer, {len(data)} bytes of changelog"}, root))
    return out


def measure_group(counting: Counting, url: str, options: dict[str, Any], mode: str, work: str) -> Measured:
    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.group import GroupCommitter
    from blobstate.commit.healing import HealSources
    from blobstate.model import changelog
    from blobstate.model.layout import now_ms
    from blobstate.model.records import StoreKey
    from blobstate.repository.repo import Repository
    from blobstate.worker import stage_changelog

    key = StoreKey("stream", "group", "routes")
    root = url.split("://", 1)[1]
    with Repository.open(url, storage_options=options, ttl_mode=mode) as repository, \
            StoreCommitter(key, repository, store_type="rocksdb", work_dir=os.path.join(work, "group-wd")) as c:
        groups = GroupCommitter(c, num_partitions=PARTITIONS)

        def stage(batch: int) -> tuple[list[Any], HealSources, int]:
            created = now_ms()
            entries, kept = [], {}
            for p in range(PARTITIONS):
                data = changelog.encode([(changelog.PUT, f"p{p}-b{batch}", "v")])
                entry = stage_changelog(repository, key, partition=p, batch_id=batch, data=data, ttl_ms=c.ttl_ms)
                entries.append(entry)
                kept[entry.blob_id] = data
            return entries, HealSources(kept), created

        for batch in (0, 1):
            (entries, sources, created), staged, _ = counting.measure(lambda b=batch: stage(b))
            _, reqs, wall = counting.measure(lambda e=entries, s=sources, t=created, b=batch: groups.commit(
                e, batch_id=b, query_id="q", created_ms=t, sources=s))
    return Measured("group", mode, 0, reqs, wall,
                    {"what": f"the driver's commit of {PARTITIONS} changelog parts",
                     "staging": {"requests": len(staged), "depth": critical_path_depth(staged),
                                 "objectsUploaded": uploads(staged, root)}}, root)


def run(server: Any, *, keys: int, size: int, modes: Sequence[str] = MODES,
        kinds: Sequence[str] = ("snapshot", "delta", "group")) -> list[Measured]:
    """Every kind in every mode against ``server`` (a fresh bucket each), in this process."""
    import boto3

    from bench.s3server import ACCESS_KEY, REGION, SECRET_KEY

    client = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name=REGION)
    options = {"endpoint_url": server.endpoint, "key": ACCESS_KEY, "secret": SECRET_KEY}
    counting = Counting(server)
    out: list[Measured] = []
    for mode in modes:
        bucket = f"requests-{mode}-{os.getpid()}-{int(time.time() * 1000) % 10**8}"
        client.create_bucket(Bucket=bucket)
        url = f"s3://{bucket}/repo"
        work = tempfile.mkdtemp(prefix=f"bench-requests-{mode}-")
        try:
            if "snapshot" in kinds:
                out += measure_snapshot(counting, url, options, mode, work, keys=keys, size=size)
            if "delta" in kinds:
                out += measure_delta(counting, url, options, mode, work)
            if "group" in kinds:
                out.append(measure_group(counting, url, options, mode, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return out


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = ["| commit | TTL mode | objects uploaded | requests | depth | by kind |",
             "| --- | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        kinds = ", ".join(f"{k} {v}" for k, v in r["byKind"].items())
        staging = f" (+ staging: {r['staging']['requests']} requests, depth {r['staging']['depth']})" \
            if "staging" in r else ""
        lines.append(f"| {r['kind']} | {r['mode']} | {r['objectsUploaded']} | {r['requests']}{staging} | "
                     f"{r['depth']} | {kinds} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    from bench.s3server import S3Server, client_env
    from blobstate.config.units import parse_size

    parser = argparse.ArgumentParser(prog="python -m bench.requests", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--size", default="16MiB")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--latency-ms", type=float, default=LATENCY_MS,
                        help="an emulated round trip the server adds to every request")
    args = parser.parse_args(argv)
    os.environ.update(client_env())
    work = tempfile.mkdtemp(prefix="bench-requests-")
    server = S3Server(os.path.join(work, "moto.log"), latency_ms=args.latency_ms)
    try:
        measured = run(server, keys=args.keys, size=parse_size(args.size), modes=args.modes.split(","))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    rows = [m.to_json() for m in measured]
    result = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "host": platform.node(), "load": os.getloadavg(),
              "keys": args.keys, "size": args.size, "latencyMs": args.latency_ms, "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    print(table(rows))
    for r in rows:
        print(f"\n{r['kind']} ({r['mode']}): " + "; ".join(r["sequence"]))


__all__ = ["Counting", "Measured", "Request", "asdict", "critical_path_depth", "run"]

if __name__ == "__main__":
    main()
