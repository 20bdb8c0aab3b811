"""A raw parallel S3 client, the plainest fast transfer of the same bytes: obstore (Rust ``object_store``), no
checksums, no index, no journal, no memory bound.

``python -m bench.s3raw put ENDPOINT SRC_DIR BUCKET/PREFIX NAME...``  uploads SRC_DIR/NAME to BUCKET/PREFIX/NAME
``python -m bench.s3raw get ENDPOINT DEST_DIR KEY...``               downloads each BUCKET/KEY into DEST_DIR

put: one PUT per file (multipart above 64 MiB in 16 MiB parts), ``CONCURRENCY`` files at once. get: every object
split into ``RANGE`` byte ranges, ``RANGE_CONCURRENCY`` ranged GETs in flight over all objects, each written with
``pwrite`` at its offset as it arrives (rclone's multi-thread streams). Credentials come from the ``AWS_*``
environment. Prints the bytes moved.
"""

from __future__ import annotations

import os
import posixpath
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

CONCURRENCY = 8
RANGE = 8 << 20
RANGE_CONCURRENCY = 16
MULTIPART_AT = 64 << 20


def _store(endpoint: str, bucket: str) -> Any:
    from obstore.store import S3Store

    return S3Store(bucket, endpoint=endpoint, virtual_hosted_style_request=False,
                   region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
                   client_options={"allow_http": endpoint.startswith("http://")})


def put(endpoint: str, src_dir: str, target: str, names: list[str]) -> int:
    import obstore

    bucket, _, prefix = target.partition("/")
    store = _store(endpoint, bucket)

    def one(name: str) -> int:
        path = os.path.join(src_dir, name)
        size = os.path.getsize(path)
        obstore.put(store, posixpath.join(prefix, name), Path(path), use_multipart=size > MULTIPART_AT,
                    chunk_size=16 << 20, max_concurrency=4)
        return size

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return sum(pool.map(one, names))


def get(endpoint: str, dest_dir: str, keys: list[str]) -> int:
    import obstore

    os.makedirs(dest_dir, exist_ok=True)
    stores: dict[str, Any] = {}
    jobs = []
    fds = []
    total = 0
    for i, full in enumerate(keys):
        bucket, _, key = full.partition("/")
        store = stores.setdefault(bucket, _store(endpoint, bucket))
        size = int(obstore.head(store, key)["size"])
        fd = os.open(os.path.join(dest_dir, f"{i:06d}-{posixpath.basename(key)}"), os.O_WRONLY | os.O_CREAT, 0o644)
        fds.append(fd)
        total += size
        jobs += [(store, key, fd, off, min(RANGE, size - off)) for off in range(0, size, RANGE)]

    def fetch(job: tuple[Any, str, int, int, int]) -> None:
        store, key, fd, off, length = job
        data = obstore.get_range(store, key, start=off, length=length)
        os.pwrite(fd, memoryview(data), off)

    try:
        with ThreadPoolExecutor(RANGE_CONCURRENCY) as pool:
            list(pool.map(fetch, jobs))
    finally:
        for fd in fds:
            os.close(fd)
    return total


def main(argv: list[str]) -> int:
    if len(argv) >= 4 and argv[0] == "put":
        print(put(argv[1], argv[2], argv[3], argv[4:]))
        return 0
    if len(argv) >= 3 and argv[0] == "get":
        print(get(argv[1], argv[2], argv[3:]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
