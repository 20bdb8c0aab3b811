"""Turning the measured rows into ratios, the issue's targets, a Markdown table, a PNG plot and the JSON file.

Rows are ``{"backend", "tool", "op", "runs", "median": {...} | None, "samples": [...], "error"}`` as made by
``bench.run.summarise``; times in seconds, sizes in bytes (RSS in MiB).
"""

from __future__ import annotations

import json
import os
from typing import Any

OP_LABELS = {
    "backup_full": "full backup",
    "backup_incr_1pct": "incremental backup, 1% changed",
    "backup_incr_10pct": "incremental backup, 10% changed",
    "restore_empty": "restore into an empty dir",
    "restore_prev": "restore into the previous version",
}
TOOL_ORDER = ("blobstate", "blobstate-identity", "blobstate-nofsync", "limit", "restic", "rclone", "backupengine",
              "changelog", "changelog-kafka")
PEERS = ("restic", "rclone", "backupengine", "changelog", "changelog-kafka")
MB = 1e6


def emit(doc: dict[str, Any], text: str, out: str | None = None) -> None:
    """Print ``text`` (a benchmark's Markdown) and, with ``out``, write ``doc`` there as JSON."""
    print(text)
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)


def _index(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["backend"], r["tool"], r["op"]): r["median"] for r in rows if r.get("median")}


def _wall(idx: dict[tuple[str, str, str], dict[str, Any]], backend: str, tool: str, op: str) -> float | None:
    m = idx.get((backend, tool, op))
    return m["wall_s"] if m else None


def _div(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def ratios(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per backend and operation: each tool's wall time over the limit's, and each peer's over blobstate's
    (``> 1``: blobstate is that many times faster)."""
    idx = _index(rows)
    out: dict[str, Any] = {}
    for backend, tool, op in idx:
        entry = out.setdefault(backend, {}).setdefault(op, {"x_limit": {}, "peer_over_blobstate": {}})
        entry["x_limit"][tool] = _div(_wall(idx, backend, tool, op), _wall(idx, backend, "limit", op))
        if tool in PEERS:
            entry["peer_over_blobstate"][tool] = _div(_wall(idx, backend, tool, op),
                                                      _wall(idx, backend, "blobstate", op))
    if ("file", "changelog", "restore_empty") in idx:
        out.setdefault("file", {}).setdefault("restore_empty", {"x_limit": {}, "peer_over_blobstate": {}})
    return out


def _target(name: str, measured: float | None, bound: float | None, *, at_most: bool, unit: str = "x",
            detail: str = "") -> dict[str, Any]:
    """One target row; ``bound`` None makes it a figure that is only reported (``reported``: True)."""
    if bound is None:
        return {"target": name, "measured": measured, "bound": "–", "ok": None, "detail": detail,
                "reported": True}
    ok = None if measured is None else (measured <= bound if at_most else measured >= bound)
    return {"target": name, "measured": measured, "bound": f"{'<=' if at_most else '>='} {bound}{unit}",
            "ok": ok, "detail": detail}


def targets(rows: list[dict[str, Any]], info: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, each with the measured value and whether it is met (``None``: not measured)."""
    idx = _index(rows)
    out = []
    bs_restore = _wall(idx, "file", "blobstate", "restore_empty")
    out.append(_target("file:// restore (empty dir) vs cp -a of the same files", _div(
        bs_restore, _wall(idx, "file", "limit", "restore_empty")), 1.3, at_most=True))
    for peer in ("restic", "rclone", "backupengine"):
        for op in ("restore_empty", "restore_prev"):
            out.append(_target(f"file:// {OP_LABELS[op]}: {peer} time / blobstate time",
                               _div(_wall(idx, "file", peer, op), _wall(idx, "file", "blobstate", op)), 1.0,
                               at_most=False, detail="> 1 means blobstate is faster"))
    incr = idx.get(("file", "blobstate", "backup_incr_1pct"))
    delta = info["versions"]["v1"].get("delta_bytes")
    added = incr["repo_bytes_added"] if incr else None
    out.append(_target("incremental 1%: bytes added to the repository / (new SST bytes + mutable files)",
                       _div(added, delta), 1.1, at_most=True,
                       detail=f"{(added or 0) / MB:.1f} MB added vs {(delta or 0) / MB:.1f} MB that changed "
                              "(measured by listing the repository, index and leases included)"))
    out.append(_target("incremental 1%: blobstate time / cp -a of those bytes", _div(
        _wall(idx, "file", "blobstate", "backup_incr_1pct"), _wall(idx, "file", "limit", "backup_incr_1pct")),
        2.0, at_most=True))
    incr_commit = incr.get("commit_s") if incr else None
    out.append(_target("incremental 1%: blobstate in-process commit time (its --json durationMs, no interpreter "
                       "start-up) / cp -a of those bytes", _div(
                           incr_commit, _wall(idx, "file", "limit", "backup_incr_1pct")), 2.0, at_most=True,
                       detail="what a long-running job such as Spark pays per commit"))
    kafka = _wall(idx, "file", "changelog-kafka", "restore_empty")
    file_log = _wall(idx, "file", "changelog", "restore_empty")
    replay, source = (kafka, "replay from a real Kafka 0.9.0.1 broker on 127.0.0.1 (changelog-kafka)") \
        if kafka is not None else (file_log, "replay of a local log file (changelog): no Kafka replay measured")
    out.append(_target("restore vs changelog replay: changelog replay time / blobstate restore time (same state)",
                       _div(replay, bs_restore), 10.0, at_most=False, detail=source))
    out.append(_target("changelog replay from a local log file (no broker) / blobstate restore time",
                       _div(file_log, bs_restore), 10.0, at_most=False,
                       detail="the most favourable case for replay: no broker, no network"))
    out += cloud_targets(idx, info)
    return out


RSS_BOUND_MIB = 256
REQUESTS_BOUND = 27  # S3 requests per incremental commit of 1% changed, before streaming transfers


def cloud_targets(idx: dict[tuple[str, str, str], dict[str, Any]], info: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 17's targets: the fastest client measured over blobstate (>= 1), peak RSS of backup and restore
    (<= 256 MiB), S3 requests per 1% incremental commit (<= 27), the fsync cost on file://, CLI start-up."""
    out = []
    for backend in ("s3",):
        for op in ("backup_full", "restore_empty"):
            walls = {t: _wall(idx, backend, t, op) for t in ("limit", "rclone")}
            fastest = min(((w, t) for t, w in walls.items() if w is not None), default=(None, ""))
            out.append(_target(f"{backend}:// {OP_LABELS[op]}: fastest client ({fastest[1] or 'none'}) time / "
                               "blobstate time", _div(fastest[0], _wall(idx, backend, "blobstate", op)), 1.0,
                               at_most=False, detail="> 1 means blobstate is faster"))
    size = f"state of {info['params']['size'] / MB:.0f} MB"
    for backend in ("file", "s3"):
        for op in ("backup_full", "restore_empty"):
            m = idx.get((backend, "blobstate", op))
            out.append(_target(f"{backend}:// {OP_LABELS[op]}: blobstate peak RSS (MiB)",
                               round(m["peak_rss_mib"], 1) if m else None, RSS_BOUND_MIB, at_most=True,
                               unit=" MiB", detail=size))
    incr = idx.get(("s3", "blobstate", "backup_incr_1pct"))
    reqs = (incr.get("requests") or {}).get("total") if incr else None
    out.append(_target("s3:// requests per incremental commit, 1% changed", reqs, REQUESTS_BOUND, at_most=True,
                       unit="", detail="HTTP requests moto answered, counted by the server's middleware"))
    for op in ("backup_full", "backup_incr_1pct", "backup_incr_10pct"):
        with_fsync, without = idx.get(("file", "blobstate", op)), idx.get(("file", "blobstate-nofsync", op))
        out.append(_target(
            f"file:// {OP_LABELS[op]}: commit time with fsync / without (the cost of durability)",
            _div(with_fsync.get("commit_s") if with_fsync else None, without.get("commit_s") if without else None),
            None, at_most=True, detail="in-process commit time (--json durationMs); the wall times in the table "
                                       "include a syncfs after every operation, for every tool"))
    out.append(_target("file:// incremental 1%: blobstate CLI time / BackupEngine time", _div(
        _wall(idx, "file", "blobstate", "backup_incr_1pct"), _wall(idx, "file", "backupengine", "backup_incr_1pct")),
        2.0, at_most=True))
    startup = info.get("cli_version_s")
    out.append(_target("`blobstate --version` (median of 10 runs, ms)",
                       None if startup is None else round(startup * 1000, 1), 100, at_most=True, unit=" ms"))
    return out


#: The peers of issue 31's table: rclone on both backends, BackupEngine on file:// (peer / blobstate >= 1.0).
ISSUE_PEERS = ("rclone", "backupengine")


def peer_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every operation of issue 31's table on both backends: blobstate's wall time, each peer's, and each peer's
    over blobstate's (``met``: every ratio >= 1.0); restore into the previous version once more with
    ``--verify-kept identity`` (the blobstate-identity tool) when it was measured."""
    idx = _index(doc["results"])
    out = []
    for backend in ("s3", "file"):
        for op in OP_LABELS:
            for tool, label in (("blobstate", OP_LABELS[op]),
                                ("blobstate-identity", f"{OP_LABELS[op]}, --verify-kept identity")):
                mine = _wall(idx, backend, tool, op)
                if mine is None:
                    continue
                peers = {p: _wall(idx, backend, p, op) for p in ISSUE_PEERS}
                ratio = {p: _div(t, mine) for p, t in peers.items() if t is not None}
                out.append({"backend": backend, "op": op, "label": label, "blobstate_s": mine,
                            "peers_s": {p: t for p, t in peers.items() if t is not None}, "ratio": ratio,
                            "met": all(r >= 1.0 for r in ratio.values() if r is not None) if ratio else None})
    return out


def peer_markdown(doc: dict[str, Any]) -> list[str]:
    """``peer_rows`` and the Spark per-batch rows (in-process delta commits) as one table."""
    lines = ["", "### Every peer ratio (peer time / blobstate time: >= 1.0 means blobstate is as fast or faster)",
             "", "| operation | blobstate s | rclone s | BackupEngine s | rclone / blobstate | "
             "BackupEngine / blobstate | met |", "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in doc.get("peer_ratios", []):
        met = {True: "yes", False: "**no**", None: "–"}[r["met"]]
        lines.append(f"| {r['backend']}:// {r['label']} | {_fmt(r['blobstate_s'])} | "
                     f"{_fmt(r['peers_s'].get('rclone'))} | {_fmt(r['peers_s'].get('backupengine'))} | "
                     f"{_fmt(r['ratio'].get('rclone'))} | {_fmt(r['ratio'].get('backupengine'))} | {met} |")
    for backend, d in sorted(doc.get("delta_commits", {}).items()):
        reqs = d.get("requestsPerCommit")
        detail = f"; {reqs.get('total'):.0f} requests per commit" if reqs else ""
        lines.append(f"| {backend}:// Spark per batch: delta commit in process, p50 / p99 ({d['commits']} commits of "
                     f"{d['opsPerBatch']} puts{detail}) | {d['p50Ms'] / 1000:.3f} / {d['p99Ms'] / 1000:.3f} | – | – "
                     "| – | – | no peer |")
    return lines


def _fmt(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _mb(v: float | None) -> str:
    return "–" if v is None else f"{v / MB:.1f}"


def markdown(doc: dict[str, Any]) -> str:
    meta = doc["meta"]
    data = meta["data"]
    lines = [
        f"Run {meta['started']}: state of {meta['size_bytes'] / MB:.0f} MB, {meta['keys']} keys "
        f"(incompressible values), v0 = {data['versions']['v0']['sst_files']} SSTs; "
        f"{meta['runs']} run(s), medians; {meta['cache_note']}. "
        f"Machine: {meta['machine']['cpus']} CPUs, {meta['machine']['mem_gib']} GiB, "
        f"kernel {meta['machine']['kernel']}.",
        "",
        f"Changed bytes a perfect incremental copy must move: v1 (1% of keys) "
        f"{data['versions']['v1']['delta_bytes'] / MB:.1f} MB, v2 (10% more) "
        f"{data['versions']['v2']['delta_bytes'] / MB:.1f} MB; v2 vs v1 for restore into the previous version "
        f"{data['restore_prev_delta_bytes'] / MB:.1f} MB.",
        "",
        "### Targets",
        "",
        "| target | measured | bound | met |",
        "| --- | ---: | --- | --- |",
    ]
    for t in doc["targets"]:
        met = "reported" if t.get("reported") else {True: "yes", False: "**no**", None: "not measured"}[t["ok"]]
        detail = f" ({t['detail']})" if t["detail"] else ""
        lines.append(f"| {t['target']}{detail} | {_fmt(t['measured'])} | {t['bound']} | {met} |")
    idx = {(r["backend"], r["tool"], r["op"]): r for r in doc["results"]}
    for backend in ("file", "s3"):
        if not any(k[0] == backend for k in idx):
            continue
        lines += ["", f"### {backend}://", "",
                  "| operation | tool | wall s | x limit | peer / blobstate | disk read MB | disk write MB | "
                  "read() MB | write() MB | repo +MB (objects) | requests | peak RSS MiB |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for op in OP_LABELS:
            for tool in TOOL_ORDER:
                r = idx.get((backend, tool, op))
                if r is None:
                    continue
                m = r["median"]
                if not m:
                    lines.append(f"| {OP_LABELS[op]} | {tool} | failed: {r['error'][:160]!s} "
                                 "| | | | | | | | | |".replace("\n", " "))
                    continue
                rat = doc["ratios"].get(backend, {}).get(op, {})
                added = "–" if m["repo_bytes_added"] is None else \
                    f"{m['repo_bytes_added'] / MB:.1f} ({int(m['repo_objects_added'])})"
                reqs = "–" if not m.get("requests") else str(int(m["requests"].get("total", 0)))
                lines.append(
                    f"| {OP_LABELS[op]} | {tool} | {_fmt(m['wall_s'])} | {_fmt(rat.get('x_limit', {}).get(tool))} "
                    f"| {_fmt(rat.get('peer_over_blobstate', {}).get(tool))} | {_mb(m['read_bytes'])} "
                    f"| {_mb(m['write_bytes'])} | {_mb(m['rchar'])} | {_mb(m['wchar'])} | {added} | {reqs} "
                    f"| {_fmt(m['peak_rss_mib'], 0)} |")
    lines += peer_markdown(doc)
    lines += ["", "Tools and how they were run:", ""]
    lines += [f"- **{name}**: {note}" for name, note in meta["notes"].items()]
    if meta["skipped"]:
        lines += ["", "Skipped: " + "; ".join(f"{k} ({v})" for k, v in meta["skipped"].items())]
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["tools"].items())]
    return "\n".join(lines) + "\n"


def plot(doc: dict[str, Any], path: str) -> None:
    """Grouped bars of median wall time per operation and tool, one panel per backend (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idx = _index(doc["results"])
    backends = [b for b in ("file", "s3") if any(k[0] == b for k in idx)]
    fig, axes = plt.subplots(1, max(1, len(backends)), figsize=(7 * max(1, len(backends)), 4.8), squeeze=False)
    for ax, backend in zip(axes[0], backends, strict=False):
        tools = [t for t in TOOL_ORDER if any(k[0] == backend and k[1] == t for k in idx)]
        series = {t: [idx[(backend, t, op)]["wall_s"] if (backend, t, op) in idx else float("nan") for op in OP_LABELS]
                  for t in tools}
        bar_panel(ax, [OP_LABELS[o].replace(", ", "\n").replace(" into ", "\ninto ") for o in OP_LABELS], series,
                  ylabel="wall time, s (median, log scale)", log=True,
                  title=f"{backend}:// — {doc['meta']['size_bytes'] / 1e6:.0f} MB state, {doc['meta']['cache']} cache")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bar_panel(ax: Any, labels: list[str], series: dict[str, list[float]], *, ylabel: str, title: str,
              log: bool = False) -> None:
    """Grouped bars on ``ax``: one group per label, one bar per series (NaN: no bar)."""
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        ax.bar([j + i * width for j in range(len(labels))], values, width, label=name)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(labels))])
    ax.set_xticklabels(labels, fontsize=7)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)


def write_all(doc: dict[str, Any], out_dir: str) -> list[str]:
    """Write ``latest.json``, ``latest.md``, ``latest.png`` into ``out_dir``; returns their paths."""
    paths = [os.path.join(out_dir, f"latest.{ext}") for ext in ("json", "md", "png")]
    with open(paths[0], "w") as fh:
        json.dump(doc, fh, indent=1)
    with open(paths[1], "w") as fh:
        fh.write(markdown(doc))
    plot(doc, paths[2])
    return paths
