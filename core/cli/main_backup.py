"""``blobstate backup STORE_DIR``: commit the store as a new snapshot; prints the checkpoint id."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from blobstate.cli import exits, naming, output, params
from blobstate.model.layout import DEFAULT_CHUNK_SIZE, DEFAULT_TTL_MS

if TYPE_CHECKING:
    from blobstate.commit.planner import BackupPreview
    from blobstate.model.records import StoreKey


@click.command(short_help="Back up STORE_DIR as a new committed snapshot.")
@click.argument("store_dir", type=click.Path(exists=True, file_okay=False))
@params.repository_options
@params.ttl_mode_option
@params.concurrency_option
@params.work_dir_option
@params.key_options
@click.option("--store-type", default=None, envvar="BLOBSTATE_STORE_TYPE",
              help="Local store type (rocksdb, dir, ...); default: detected.")
@click.option("--batch-id", type=click.IntRange(0), default=None, help="Stream batch id to record.")
@click.option("--ttl", type=params.Duration(), default=DEFAULT_TTL_MS, show_default="1d", envvar="BLOBSTATE_TTL",
              help="How long new blobs live unless their commit completes (1d, 12h, 90s, 500ms; a number is ms).")
@click.option("--retain", type=click.IntRange(1), default=None, envvar="BLOBSTATE_RETAIN",
              help="Checkpoints kept (default: the retention the store's latest snapshot records, else 3).")
@params.keep_options
@params.append_only_option
@params.limit_upload_option
@params.limit_download_option
@click.option("--chunk-size", type=params.ByteSize(), default=DEFAULT_CHUNK_SIZE, show_default="64MiB",
              envvar="BLOBSTATE_CHUNK_SIZE", help="Bytes per blob (64MiB, 1GiB, 500MB; a number is bytes).")
@click.option("--expected-generation", type=click.IntRange(0), default=None,
              help="Fence against this generation instead of the log's latest (for orchestrators).")
@click.option("--dry-run", is_flag=True,
              help="Print what would be uploaded and dropped against the latest snapshot; commit nothing.")
@click.option("--no-create", is_flag=True, envvar="BLOBSTATE_NO_CREATE",
              help="Refuse a location that is not yet a repository (exit 6) instead of creating one there; "
                   "`blobstate init` creates a repository on purpose.")
@params.json_option
@params.quiet_option
@exits.handle_errors
def backup(store_dir: str, repo: str, log_url: str | None, storage_option: tuple[str, ...],
           log_option: tuple[str, ...], ttl_mode: str | None, max_concurrency: int, work_dir: str | None, job: str,
           task: str, store: str | None, store_type: str | None, batch_id: int | None, ttl: int,
           retain: int | None, keep_within: str | None, keep_last: int | None, keep_hourly: int | None,
           keep_daily: int | None, keep_weekly: int | None, keep_monthly: int | None, keep_yearly: int | None,
           append_only: bool | None, limit_upload: int | None, limit_download: int | None,
           chunk_size: int, expected_generation: int | None, dry_run: bool, no_create: bool, as_json: bool,
           quiet: bool) -> None:
    """Back up STORE_DIR as a new committed snapshot; prints the checkpoint id on stdout.

    The first backup into an empty location creates the repository and says "created repository at URL" on
    stderr; with --no-create it is refused instead (exit 6). Retention (--retain, --keep-*: restic's forget rules)
    runs after the commit and is recorded in the snapshot, so a later backup or gc without these options keeps
    applying it."""
    from blobstate import api
    from blobstate.config.units import format_duration, format_size

    key = naming.store_key(job, task, store, store_dir)
    policy = params.retention_policy()
    exits.watch_store(repo, key.job, key.task, key.store, work_dir, naming.storage_options(storage_option))
    if dry_run:
        preview = api.preview_backup(store_dir, job=key.job, task=key.task, store=key.store, store_type=store_type,
                                     chunk_size=chunk_size, work_base=work_dir,
                                     **naming.repository(repo, log_url, storage_option, log_option))
        _print_preview(key, preview, as_json)
        return
    result = api.backup(
        store_dir, job=key.job, task=key.task, store=key.store, store_type=store_type, batch_id=batch_id, ttl=ttl,
        retention=policy, append_only=append_only, limit_upload=limit_upload, limit_download=limit_download,
        chunk_size=chunk_size, max_concurrency=max_concurrency, ttl_mode=ttl_mode, work_base=work_dir,
        progress=output.progress(quiet), expected_generation=expected_generation, create=not no_create,
        on_create=lambda url: output.err(f"created repository at {url}"),
        **naming.repository(repo, log_url, storage_option, log_option),
    )
    if not quiet and not as_json:
        output.err(f"committed {key} generation {result.checkpoint.generation}: {result.files_uploaded} of "
                   f"{result.files_total} files, {format_size(result.bytes_uploaded)} of "
                   f"{format_size(result.bytes_total)} uploaded in {format_duration(result.duration_ms)}")
    output.emit(as_json, result.to_json(), result.checkpoint.checkpoint_id)


def _print_preview(key: StoreKey, preview: BackupPreview, as_json: bool) -> None:
    """``upload PATH`` / ``remove PATH`` lines on stdout (or the JSON form), a summary on stderr."""
    if as_json:
        output.emit(True, preview.to_json(), "")
        return
    for action, paths in (("upload", preview.upload), ("remove", preview.removed)):
        for path in paths:
            click.echo(f"{action} {path if path.isprintable() else ascii(path)}")
    output.err(f"dry run: {key} against {preview.previous_checkpoint_id or 'no previous snapshot'}: "
               f"{len(preview.upload)}/{preview.files_total} files ({preview.bytes_upload} of "
               f"{preview.bytes_total} bytes) to upload, {preview.unchanged} unchanged, {len(preview.removed)} "
               "dropped")
