"""``blobstate restore DEST_DIR``: bring DEST_DIR to a snapshot, downloading only what it lacks.

Afterwards DEST_DIR holds exactly the snapshot's entries: what it has that the snapshot lacks is removed. A
non-empty DEST_DIR that no restore of this store made is refused unless ``--force``; ``--dry-run`` prints the
changes (one ``action path`` per line) and changes nothing.
"""

from __future__ import annotations

import click

from blobstate.cli import common


@click.command()
@click.argument("dest_dir", type=click.Path(file_okay=False))
@common.repo_options
@common.ttl_mode_option
@common.concurrency_option
@common.work_dir_option
@common.key_options
@click.option("--checkpoint", "checkpoint_id", default=None, help="Checkpoint id (default: the latest).")
@click.option("--max-batch-id", type=click.IntRange(0), default=None,
              help="Restore the newest checkpoint whose batch id is <= this.")
@click.option("--store-type", default=None, help="Local store type (default: from the snapshot).")
@click.option("--no-cleanup", is_flag=True, help="Skip the init cleanup (TTL removal, retention).")
@click.option("--force", is_flag=True,
              help="Restore into a non-empty directory no restore made, deleting what the snapshot lacks.")
@click.option("--dry-run", is_flag=True, help="Print what would change; change nothing.")
@common.json_option
@common.quiet_option
@common.handle_errors
def restore(dest_dir: str, repo: str, log_url: str | None, storage_option: tuple[str, ...], ttl_mode: str | None,
            max_concurrency: int, work_dir: str | None, job: str, task: str, store: str | None,
            checkpoint_id: str | None, max_batch_id: int | None, store_type: str | None, no_cleanup: bool,
            force: bool, dry_run: bool, as_json: bool, quiet: bool) -> None:
    """Restore a checkpoint into DEST_DIR, downloading only what is missing or different."""
    from blobstate import api

    key = common.store_key(job, task, store, dest_dir)
    result = api.restore(
        dest_dir, repo=repo, log=log_url, job=key.job, task=key.task, store=key.store, store_type=store_type,
        checkpoint_id=checkpoint_id, max_batch_id=max_batch_id, storage_options=common.storage_options(storage_option),
        ttl_mode=ttl_mode, max_concurrency=max_concurrency, work_dir=common.store_work_dir(work_dir, repo, key),
        progress=common.progress(quiet or dry_run), cleanup=not no_cleanup, force=force, dry_run=dry_run,
    )
    if as_json:
        common.emit(True, result.to_json(), "")
        return
    if dry_run:
        for name in result.recovered:
            click.echo(f"recover {name} (an interrupted restore)")
        for action, path in result.changes:
            click.echo(f"{action} {path if path.isprintable() else ascii(path)}")
        common.err(f"dry run: would restore {key} checkpoint {result.checkpoint.checkpoint_id}: "
                   f"{result.files_downloaded} files to download ({result.bytes_downloaded} bytes), "
                   f"{result.files_kept} kept, {result.files_reused} reused, {result.files_removed} removed")
        return
    if not quiet:
        common.err(f"restored {key} checkpoint {result.checkpoint.checkpoint_id} (generation "
                   f"{result.checkpoint.generation}): {result.files_downloaded} files downloaded "
                   f"({result.bytes_downloaded} bytes), {result.files_kept} kept, {result.files_reused} reused, "
                   f"{result.files_removed} removed, in {result.duration_ms:.0f} ms")
    click.echo(result.checkpoint.checkpoint_id)
