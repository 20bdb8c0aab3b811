"""The physical limit on S3: s3fs's own concurrent batch transfer of the same bytes, nothing else.

``python -m bench.s3raw put ENDPOINT SRC_DIR BUCKET/PREFIX NAME...``  uploads SRC_DIR/NAME to BUCKET/PREFIX/NAME
``python -m bench.s3raw get ENDPOINT DEST_DIR KEY...``               downloads each BUCKET/KEY into DEST_DIR
Both run through s3fs's async batch calls (``batch_size`` = 8 concurrent transfers, blobstate's default
``max_concurrency``). Credentials come from the ``AWS_*`` environment.
"""

from __future__ import annotations

import os
import posixpath
import sys

CONCURRENCY = 8


def _fs(endpoint: str) -> object:
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True, use_listings_cache=False)


def put(endpoint: str, src_dir: str, target: str, names: list[str]) -> int:
    fs = _fs(endpoint)
    sources = [os.path.join(src_dir, n) for n in names]
    fs.put(sources, [posixpath.join(target, n) for n in names], batch_size=CONCURRENCY)  # type: ignore[attr-defined]
    return sum(os.path.getsize(s) for s in sources)


def get(endpoint: str, dest_dir: str, keys: list[str]) -> int:
    fs = _fs(endpoint)
    os.makedirs(dest_dir, exist_ok=True)
    targets = [os.path.join(dest_dir, f"{i:06d}-{posixpath.basename(k)}") for i, k in enumerate(keys)]
    fs.get(keys, targets, batch_size=CONCURRENCY)  # type: ignore[attr-defined]
    return sum(os.path.getsize(t) for t in targets)


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
