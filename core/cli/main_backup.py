"""``blobstate backup STORE_DIR``: commit the store as a new snapshot; prints the checkpoint id."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from blobstate.cli import common

if TYPE_CHECKING:
    from blobstate.model import StoreKey
    from blobstate.pipelines.planner import BackupPreview


@click.command()
@click.argument("store_dir", type=click.Path(exists=True, file_okay=False))
@common.repo_options
@common.ttl_mode_option
@common.concurrency_option
@common.work_dir_option
@common.key_options
@click.option("--store-type", default=None, help="Local store type (rocksdb, dir, ...); default: detected.")
@click.option("--batch-id", type=click.IntRange(0), default=None, help="Stream batch id to record.")
@click.option("--ttl", "ttl_ms", type=click.IntRange(1), default=None, help="Blob TTL in ms (default: 1 day).")
@click.option("--retain", type=click.IntRange(1), default=3, show_default=True, help="Checkpoints kept.")
@click.option("--chunk-size", type=click.IntRange(1), default=64 << 20, show_default=True, help="Bytes per blob.")
@click.option("--expected-generation", type=click.IntRange(0), default=None,
              help="Fence against this generation instead of the log's latest (for orchestrators).")
@click.option("--dry-run", is_flag=True,
              help="Print what would be uploaded and dropped against the latest snapshot; commit nothing.")
@common.json_option
@common.quiet_option
@common.handle_errors
def backup(store_dir: str, repo: str, log_url: str | None, storage_option: tuple[str, ...], ttl_mode: str | None,
           max_concurrency: int, work_dir: str | None, job: str, task: str, store: str | None,
           store_type: str | None, batch_id: int | None, ttl_ms: int | None, retain: int, chunk_size: int,
           expected_generation: int | None, dry_run: bool, as_json: bool, quiet: bool) -> None:
    """Back up STORE_DIR as a new committed snapshot; prints the checkpoint id on stdout."""
    from blobstate import api
    from blobstate.layout import DEFAULT_TTL_MS

    key = common.store_key(job, task, store, store_dir)
    result = api.backup(
        store_dir, repo=repo, log=log_url, job=key.job, task=key.task, store=key.store, store_type=store_type,
        batch_id=batch_id, ttl_ms=ttl_ms or DEFAULT_TTL_MS, retain=retain, chunk_size=chunk_size,
        max_concurrency=max_concurrency, storage_options=common.storage_options(storage_option), ttl_mode=ttl_mode,
        work_dir=common.store_work_dir(work_dir, repo, key), progress=common.progress(quiet),
        expected_generation=expected_generation, dry_run=dry_run,
    )
    if isinstance(result, api.BackupPreview):
        _print_preview(key, result, as_json)
        return
    if not quiet and not as_json:
        common.err(f"committed {key} generation {result.checkpoint.generation}: {result.files_uploaded}/"
                   f"{result.files_total} files, {result.bytes_uploaded} of {result.bytes_total} bytes uploaded in "
                   f"{result.duration_ms:.0f} ms")
    common.emit(as_json, result.to_json(), result.checkpoint.checkpoint_id)


def _print_preview(key: StoreKey, preview: BackupPreview, as_json: bool) -> None:
    """``upload PATH`` / ``remove PATH`` lines on stdout (or the JSON form), a summary on stderr."""
    if as_json:
        common.emit(True, preview.to_json(), "")
        return
    for action, paths in (("upload", preview.upload), ("remove", preview.removed)):
        for path in paths:
            click.echo(f"{action} {path if path.isprintable() else ascii(path)}")
    common.err(f"dry run: {key} against {preview.previous_checkpoint_id or 'no previous snapshot'}: "
               f"{len(preview.upload)}/{preview.files_total} files ({preview.bytes_upload} of "
               f"{preview.bytes_total} bytes) to upload, {preview.unchanged} unchanged, {len(preview.removed)} "
               "dropped")
