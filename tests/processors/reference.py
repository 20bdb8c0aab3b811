"""The five processors' logic in plain pandas/Python over a list of batches, for comparison: what each batch emits
and the state left after the last one, with Spark's TTL and timer rules stated directly (a value is visible while
``processing time < last write + TTL``; an event-time timer fires when the watermark reaches it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from tests.processors import dedup, page_visits, sessions, top_n


@dataclass
class Batch:
    """One micro-batch: its rows (None: a no-data batch), processing time, watermark, late-events watermark."""

    data: pd.DataFrame | None
    at: int
    watermark: int | None = None
    late: int | None = None


def running_count(batches: list[Batch]) -> tuple[list[list[dict]], dict]:
    counts: dict[str, int] = {}
    out = []
    for b in batches:
        rows = []
        if b.data is not None:
            for k, n in b.data.groupby("k").size().items():
                counts[k] = counts.get(k, 0) + int(n)
                rows.append({"k": k, "count": counts[k]})
        out.append(rows)
    return out, counts


def dedup_ref(batches: list[Batch]) -> tuple[list[list[dict]], dict]:
    expiry: dict[str, int] = {}
    out = []
    for b in batches:
        rows = []
        if b.data is not None:
            for key, value in b.data.groupby("id")["value"].min().items():
                if b.at < expiry.get(key, -(1 << 62)):
                    continue
                expiry[key] = b.at + dedup.TTL_MS
                rows.append({"id": key, "value": int(value)})
        expiry = {k: e for k, e in expiry.items() if b.at < e}
        out.append(rows)
    return out, expiry


def sessions_ref(batches: list[Batch]) -> tuple[list[list[dict]], dict]:
    state: dict[str, list[int]] = {}  # user -> [start, last, events]
    out = []
    for b in batches:
        rows = []
        if b.data is not None:
            data = b.data.assign(ms=[int(t.timestamp() * 1000) for t in b.data["ts"]])
            if b.late is not None:
                data = data[data["ms"] > b.late]
            for user, group in data.groupby("user"):
                times = group["ms"].tolist()
                if user in state:
                    s = state[user]
                    state[user] = [min(s[0], *times), max(s[1], *times), s[2] + len(times)]
                else:
                    state[user] = [min(times), max(times), len(times)]
        if b.watermark is not None:
            due = sorted((s[1] + sessions.GAP_MS, u) for u, s in state.items() if s[1] + sessions.GAP_MS <= b.watermark)
            for end, user in due:
                start, _, events = state.pop(user)
                rows.append({"user": user, "start_ms": start, "end_ms": end, "events": events})
        out.append(rows)
    return out, state


def top_n_ref(batches: list[Batch]) -> tuple[list[list[dict]], dict]:
    best: dict[str, list[int]] = {}
    out = []
    for b in batches:
        rows = []
        if b.data is not None:
            for k, scores in b.data.groupby("k")["score"]:
                best[k] = sorted(best.get(k, []) + [int(s) for s in scores], reverse=True)[:top_n.N]
                rows += [{"k": k, "rank": i + 1, "score": s} for i, s in enumerate(best[k])]
        out.append(rows)
    return out, best


def page_visits_ref(batches: list[Batch]) -> tuple[list[list[dict]], dict]:
    visits: dict[tuple[str, str], tuple[int, int]] = {}  # (user, page) -> (visits, expiry)
    out = []
    for b in batches:
        rows = []
        if b.data is not None:
            for (user, page), n in b.data.groupby(["user", "page"]).size().items():
                before, exp = visits.get((user, page), (0, -(1 << 62)))
                total = (before if b.at < exp else 0) + int(n)
                visits[(user, page)] = (total, b.at + page_visits.TTL_MS)
                rows.append({"user": user, "page": page, "visits": total})
        visits = {k: v for k, v in visits.items() if b.at < v[1]}
        out.append(rows)
    return out, visits


def canonical(rows: list[dict[str, Any]]) -> list[tuple]:
    """Rows as sorted tuples (an output's order within a batch is not part of the semantics)."""
    return sorted(tuple(sorted(r.items())) for r in rows)
