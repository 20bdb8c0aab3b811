"""The input batches of the five processors (deterministic: a seeded ``random.Random``), as pandas DataFrames; the
same data feeds blobstate's runtime, the reference and Spark."""

from __future__ import annotations

import random

import pandas as pd

from tests.processors import sessions

BASE_MS = 1_700_000_000_000


def running_count(batches: int = 6) -> list[pd.DataFrame]:
    rng = random.Random(1)
    keys = [f"k{i}" for i in range(40)]
    return [pd.DataFrame({"k": [rng.choice(keys) for _ in range(60)], "v": list(range(60))})
            for _ in range(batches)]


def dedup(batches: int = 10) -> list[pd.DataFrame]:
    rng = random.Random(2)
    ids = [f"id{i}" for i in range(30)]
    return [pd.DataFrame({"id": [rng.choice(ids) for _ in range(25)],
                          "value": [rng.randrange(1000) for _ in range(25)]}) for _ in range(batches)]


def sessions_events(batches: int = 16, with_data: int = 10) -> list[pd.DataFrame | None]:
    """Events on a 5 s grid, so that events land exactly on the watermark and timers exactly on it too; each batch
    after the first also holds one event exactly on the watermark of the batches before it (late)."""
    rng = random.Random(3)
    users = [f"u{i}" for i in range(20)]
    out: list[pd.DataFrame | None] = []
    clock, newest = 0, None
    for i in range(batches):
        clock += 5_000 * rng.randrange(1, 5)
        if i >= with_data:
            out.append(None)
            continue
        events = [(rng.choice(users), BASE_MS + clock - 5_000 * rng.randrange(0, 4)) for _ in range(6)]
        if newest is not None:
            events.append((users[i], newest - sessions.WATERMARK_DELAY_MS))
        newest = max([t for _, t in events] + ([newest] if newest is not None else []))
        out.append(pd.DataFrame({"user": [u for u, _ in events],
                                 "ts": pd.to_datetime([t for _, t in events], unit="ms", utc=True)}))
    return out


def top_n(batches: int = 8) -> list[pd.DataFrame]:
    rng = random.Random(4)
    keys = [f"k{i}" for i in range(15)]
    return [pd.DataFrame({"k": [rng.choice(keys) for _ in range(30)],
                          "score": [rng.randrange(10_000) for _ in range(30)]}) for _ in range(batches)]


def page_visits(batches: int = 10) -> list[pd.DataFrame]:
    rng = random.Random(5)
    users, pages = [f"u{i}" for i in range(6)], [f"/p{i}" for i in range(5)]
    return [pd.DataFrame({"user": [rng.choice(users) for _ in range(20)],
                          "page": [rng.choice(pages) for _ in range(20)]}) for _ in range(batches)]
