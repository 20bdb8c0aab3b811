"""``blobstate verify``: read every blob of a checkpoint and check sizes and CRC32C, of one store or of every store
in the repository; exit 3 on any damage."""

from __future__ import annotations

from typing import Any

import click

from blobstate.cli import exits, naming, output, params


@click.command(short_help="Read and check every blob of a checkpoint (size, CRC32C).")
@params.repository_options
@params.concurrency_option
@params.filter_options
@params.checkpoint_option
@click.option("--all", "all_checkpoints", is_flag=True, help="Verify every retained checkpoint.")
@click.option("--read-data-subset", "read_data_subset", default=None, envvar="BLOBSTATE_READ_DATA_SUBSET",
              metavar="n/t|x%", help="Read only part of the data (restic's check): n/t the files whose first blob "
              "is in bucket n of t (rotate n over 1..t to read everything once), x% a random x percent. Metadata "
              "(records, indexes, changelogs) is always checked.")
@click.option("--seed", type=int, default=None, hidden=True, help="Seed of the random x% sample (tests).")
@params.limit_download_option
@params.json_option
@exits.handle_errors
def verify(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...],
           max_concurrency: int, job: str | None, task: str | None, store: str | None, checkpoint: str | None,
           all_checkpoints: bool, read_data_subset: str | None, seed: int | None, limit_download: int | None,
           as_json: bool) -> None:
    """Read every blob of the latest checkpoint (--checkpoint one, --all every retained one) of one store
    (--store) or of every store in the repository, and check sizes and CRC32C; exit 3 on any damage. The latest of
    a partitioned store is every partition's latest state (its snapshot and the deltas after it)."""
    from blobstate import api
    from blobstate.config.units import format_size

    reports = api.verify(job=job, task=task, store=store, checkpoint=checkpoint, all_checkpoints=all_checkpoints,
                         max_concurrency=max_concurrency, raise_on_error=False, read_data_subset=read_data_subset,
                         seed=seed, limit_download=limit_download,
                         **naming.repository(repo, log_url, storage_option, log_option))

    def lines(r: Any) -> list[str]:
        n = len(r.problems)
        status = "ok" if r.ok else f"{n} problem{'' if n == 1 else 's'}"
        part = "" if r.partition is None else f" partition {r.partition}"
        files = f"{r.files} file{'' if r.files == 1 else 's'}" + (
            f" read ({r.files_skipped} left for another subset)" if r.files_skipped else "")
        return [f"{r.checkpoint.store_key}{part} {r.checkpoint.checkpoint_id} (generation "
                f"{r.checkpoint.generation}): {files}, {format_size(r.bytes_read)} read: {status}",
                *(f"  {f}: {m}" for f, m in r.problems)]

    output.show_rows(as_json, reports, empty="no checkpoints to verify", lines=lines,
                     json_of=lambda r: {"store": str(r.checkpoint.store_key), **r.to_json()})
    api.raise_for_reports(reports)
