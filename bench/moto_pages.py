"""What one page of moto's ListObjectsV2 costs, in moto's own backend (no HTTP, no client): whether it grows with
the bucket's key count or only with the prefix's (``bench/README.md``, repository-wide verbs).

``python -m bench.moto_pages`` fills an in-process moto bucket with a prefix of 10,000 keys (a repository's
``checkpoints/`` at 10,000 stores), then grows the bucket to 40,000 and 80,000 keys under other prefixes, timing
at each size (median of 5) the first and second page (1,000 keys) of that prefix and a page of the whole bucket.
"""

from __future__ import annotations

import statistics
import time

BUCKET = "pagebucket"
PREFIX = "repo/checkpoints/"


def main() -> None:
    from moto import mock_aws
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    with mock_aws():
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        backend.create_bucket(BUCKET, "us-east-1")
        bucket = backend.get_bucket(BUCKET)

        def fill(n: int, prefix: str) -> None:
            for i in range(n):
                backend.put_object(BUCKET, f"{prefix}{i:08d}", b"x" * 100)

        def page(prefix: str, token: str | None = None) -> tuple[float, str | None]:
            t0 = time.perf_counter()
            _, _, following = backend.list_objects_v2(bucket=bucket, prefix=prefix, delimiter=None,
                                                      continuation_token=token, start_after=None, max_keys=1000)
            return time.perf_counter() - t0, following

        def median_ms(prefix: str, token: str | None = None) -> float:
            return 1000 * statistics.median(page(prefix, token)[0] for _ in range(5))

        fill(10_000, PREFIX)
        for total in (10_000, 40_000, 80_000):
            fill(total - len(bucket.keys), f"repo/data{total}/")
            second = page(PREFIX)[1]
            print(f"bucket of {len(bucket.keys):6d} keys: a page of the prefix of 10,000 keys "
                  f"{median_ms(PREFIX):.0f} ms "
                  f"(its 2nd page {median_ms(PREFIX, second):.0f} ms), a page of the whole bucket "
                  f"{median_ms('repo/'):.0f} ms", flush=True)


if __name__ == "__main__":
    main()
