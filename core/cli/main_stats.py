"""``blobstate stats``: space use per store: checkpoints, data size, files, stored bytes, deduplication."""

from __future__ import annotations

from typing import Any

import click

from blobstate.cli import exits, naming, output, params


@click.command(short_help="Per store: checkpoints, sizes, bytes stored, deduplication.")
@params.repository_options
@params.concurrency_option
@params.filter_options
@params.json_option
@exits.handle_errors
def stats(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...],
          max_concurrency: int, job: str | None, task: str | None, store: str | None, as_json: bool) -> None:
    """Per store: retained checkpoints, files and data size of the latest, logical bytes of all retained
    snapshots, bytes stored, and the deduplication ratio (logical / stored snapshot data bytes). A partitioned
    store's latest is every partition's latest state added up."""
    from blobstate import api
    from blobstate.config.units import format_size

    result = api.stats(job=job, task=task, store=store, max_concurrency=max_concurrency,
                       **naming.repository(repo, log_url, storage_option, log_option))

    def lines(s: Any) -> list[str]:
        latest = s.latest
        files = "?" if latest is None or latest.files_total is None else latest.files_total
        ratio = "-" if s.dedup_ratio is None else f"{s.dedup_ratio:.2f}x"
        out = [f"{s.key!s:28} {s.checkpoints:>5} {files!s:>7} {format_size(latest.bytes_total if latest else 0):>11} "
               f"{format_size(s.logical_bytes):>10} {format_size(s.stored_bytes):>10} "
               f"{format_size(s.unreferenced_bytes):>10} {ratio:>6}"]
        if s.partitions:
            out.append(f"  {s.partitions} partitions: latest state of each added up; "
                       f"{format_size(s.changelog_bytes)} of delta changelogs")
        return out + [f"  problem: {p}" for p in s.problems]

    output.show_rows(as_json, result, empty="no stores", lines=lines,
                     header=f"{'store':28} {'ckpts':>5} {'files':>7} {'latest size':>11} {'logical':>10} "
                            f"{'stored':>10} {'unref.':>10} {'dedup':>6}")
