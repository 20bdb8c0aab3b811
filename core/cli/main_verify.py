"""``blobstate verify``: read every blob of a checkpoint and check sizes and CRC32C; exit 3 on any damage."""

from __future__ import annotations

import click

from blobstate.cli import common


@click.command()
@common.repo_options
@common.concurrency_option
@common.key_options
@click.option("--checkpoint", "checkpoint_id", default=None, help="Checkpoint id (default: the latest).")
@click.option("--all", "all_checkpoints", is_flag=True, help="Verify every retained checkpoint.")
@common.json_option
@common.handle_errors
def verify(repo: str, log_url: str | None, storage_option: tuple[str, ...], max_concurrency: int, job: str,
           task: str, store: str | None, checkpoint_id: str | None, all_checkpoints: bool, as_json: bool) -> None:
    """Read every blob of a checkpoint and check sizes and CRC32C; exit 3 on any damage."""
    from blobstate import api

    key = common.store_key(job, task, store)
    reports = api.verify(repo=repo, key=key, log=log_url, checkpoint_id=checkpoint_id,
                         all_checkpoints=all_checkpoints, storage_options=common.storage_options(storage_option),
                         max_concurrency=max_concurrency, raise_on_error=False)
    if as_json:
        common.emit(True, [r.to_json() for r in reports], "")
    else:
        for r in reports:
            status = "ok" if r.ok else f"{len(r.problems)} problem(s)"
            click.echo(f"{key} {r.checkpoint.checkpoint_id}: {r.files} files, {r.bytes_read} bytes read: {status}")
            for f, m in r.problems:
                click.echo(f"  {f}: {m}")
    api.raise_for_reports(reports)
