"""``blobstate restore DEST_DIR``: bring DEST_DIR to a snapshot, downloading only what it lacks.

Afterwards DEST_DIR holds exactly the snapshot's entries: what it has that the snapshot lacks is removed. A
non-empty DEST_DIR that no restore of this store made is refused unless ``--force``; ``--dry-run`` prints the
changes (one ``action path`` per line) and changes nothing.
"""

from __future__ import annotations

from typing import Any

import click

from blobstate.cli import exits, naming, output, params

#: ``--verify-kept`` modes, the default first (``blobstate.restoring.plan.VERIFY_KEPT``; named here so that
#: ``--help`` imports no restore code).
VERIFY_KEPT = ("cache", "identity", "full")


@click.command(short_help="Restore a checkpoint (default: the latest) into DEST_DIR.")
@click.argument("dest_dir", type=click.Path(file_okay=False))
@params.repository_options
@params.ttl_mode_option
@params.concurrency_option
@params.work_dir_option
@params.read_key_options
@params.checkpoint_option
@click.option("--max-batch-id", type=click.IntRange(0), default=None,
              help="Restore the newest checkpoint whose batch id is <= this.")
@click.option("--checkpoint-location", default=None, metavar="PATH",
              help="The query's Spark checkpoint location (a path or fsspec URL, read without Spark): restore the "
                   "state after the batch Spark committed (default: the latest, which may be a batch Spark "
                   "re-runs).")
@click.option("--partition", type=click.IntRange(0), default=None,
              help="Of a partitioned store (group checkpoints): restore this partition.")
@click.option("--all-partitions", is_flag=True,
              help="Of a partitioned store: restore every partition P into DEST_DIR/P/, --max-concurrency "
                   "partitions at a time in this process; prints each partition's throughput and the group's.")
@click.option("--store-type", default=None, envvar="BLOBSTATE_STORE_TYPE",
              help="Local store type (default: from the snapshot).")
@click.option("--force", is_flag=True,
              help="Restore into a non-empty directory no restore made, deleting what the snapshot lacks.")
@click.option("--dry-run", is_flag=True, help="Print what would change; change nothing.")
@click.option("--no-cleanup", is_flag=True, help="Skip the init cleanup (TTL removal, retention).")
@click.option("--verify-kept", type=click.Choice(VERIFY_KEPT), default=VERIFY_KEPT[0], show_default=True,
              envvar="BLOBSTATE_VERIFY_KEPT",
              help="How a file already in DEST_DIR is known to be the snapshot's: cache (read, unless this "
                   "host's checksum cache, keyed with ctime, vouches for it), identity (a RocksDB SST by its name, "
                   "size and mtime, unread: faster, blind to a data block changed with the mtime put back), full "
                   "(every kept file read, no cache). Files that change in place are always read.")
@params.append_only_option
@params.limit_download_option
@params.limit_upload_option
@params.json_option
@params.quiet_option
@exits.handle_errors
def restore(dest_dir: str, repo: str, log_url: str | None, storage_option: tuple[str, ...],
            log_option: tuple[str, ...], ttl_mode: str | None, max_concurrency: int, work_dir: str | None, job: str,
            task: str | None, store: str | None, checkpoint: str | None, max_batch_id: int | None,
            partition: int | None, store_type: str | None, no_cleanup: bool, verify_kept: str, append_only: bool | None,
            limit_download: int | None, limit_upload: int | None, force: bool, dry_run: bool, as_json: bool,
            quiet: bool, all_partitions: bool, checkpoint_location: str | None) -> None:
    """Restore a checkpoint (default: the latest) into DEST_DIR, downloading only what is missing or different."""
    from blobstate import api
    from blobstate.config.units import format_duration, format_size

    if all_partitions:
        if partition is not None or checkpoint is not None:
            raise click.UsageError("--all-partitions restores the latest state of every partition (or the one "
                                   "after --max-batch-id): not with --partition or --checkpoint")
        _restore_partitions(dest_dir, naming.store_key(job, task or "0", naming.require_store(store)), task,
                            repo=repo,
                            log_url=log_url, storage_option=storage_option, log_option=log_option,
                            max_concurrency=max_concurrency, work_dir=work_dir, max_batch_id=max_batch_id,
                            cleanup=not no_cleanup, force=force, dry_run=dry_run, verify_kept=verify_kept,
                            append_only=append_only, limit_download=limit_download, limit_upload=limit_upload,
                            as_json=as_json, quiet=quiet, checkpoint_location=checkpoint_location)
        return
    key = naming.store_key(job, task or "0", store, dest_dir)
    exits.watch_store(repo, key.job, task, key.store, work_dir)  # without --task: the store found by api.restore
    result = api.restore(
        dest_dir, job=key.job, task=task, store=key.store, store_type=store_type, checkpoint=checkpoint,
        max_batch_id=max_batch_id, partition=partition,
        **naming.repository(repo, log_url, storage_option, log_option),
        ttl_mode=ttl_mode, max_concurrency=max_concurrency,
        work_base=work_dir, progress=output.progress(quiet or dry_run), cleanup=not no_cleanup, force=force,
        dry_run=dry_run, verify_kept=verify_kept, append_only=append_only, limit_download=limit_download,
        limit_upload=limit_upload, checkpoint_location=checkpoint_location,
    )
    if as_json:
        output.emit(True, result.to_json(), "")
        return
    key = result.checkpoint.store_key
    if dry_run:
        for name in result.recovered:
            click.echo(f"recover {name} (an interrupted restore)")
        for action, path in result.changes:
            click.echo(f"{action} {path if path.isprintable() else ascii(path)}")
        output.err(f"dry run: would restore {_what(key, result)}: "
                   f"{_files(result.files_downloaded)} to download ({format_size(result.bytes_downloaded)}), "
                   f"{result.files_kept} kept, {result.files_reused} reused, {result.files_removed} removed")
        if result.needs_force:
            output.err(f"{dest_dir} is not empty and no restore of this store made it: the restore itself needs "
                       "--force (it removes what the snapshot lacks)")
        return
    if not quiet:
        output.err(f"restored {_what(key, result)}: {_files(result.files_downloaded)} downloaded "
                   f"({format_size(result.bytes_downloaded)}), {result.files_kept} kept, {result.files_reused} "
                   f"reused, {result.files_removed} removed, in {format_duration(result.duration_ms)}")
    output.emit(False, None, result.checkpoint.checkpoint_id)


def _restore_partitions(dest_dir: str, key: Any, task: str | None, *, repo: str, log_url: str | None,
                        storage_option: tuple[str, ...], log_option: tuple[str, ...], as_json: bool, quiet: bool,
                        **options: Any) -> None:
    """``--all-partitions``: every partition into ``DEST_DIR/<p>/``; one line per partition and the group's
    throughput on stderr, the checkpoint of each on stdout (or the JSON)."""
    from blobstate import api
    from blobstate.config.units import format_duration, format_size

    exits.watch_store(repo, key.job, task, key.store, options["work_dir"])
    options["work_base"] = options.pop("work_dir")
    group = api.restore_partitions(dest_dir, job=key.job, task=task, store=key.store, **options,
                                   **naming.repository(repo, log_url, storage_option, log_option))
    key = group.key  # the store found (without --task: under 0 or group)
    doc = group.to_json()
    if as_json:
        output.emit(True, doc, "")
        return
    if not quiet:
        for p, row in zip(sorted(group.partitions), doc["partitions"], strict=True):
            r = group.partitions[p]
            output.err(f"restored {_what(key, r)} into {row['destination']}: {_files(r.files_downloaded)} "
                       f"downloaded, {r.files_kept} kept, {r.files_reused} reused; {format_size(r.bytes_total)} in "
                       f"{format_duration(r.duration_ms)} ({_rate(r.bytes_total, r.duration_ms)})")
        output.err(f"restored {len(group.partitions)} partitions of {key}: {format_size(group.bytes_total)} in "
                   f"{format_duration(group.duration_ms)} ({_rate(group.bytes_total, group.duration_ms)} for the "
                   "group)")
    output.emit(False, None, "\n".join(f"{p} {r.checkpoint.checkpoint_id}" for p, r in
                                       sorted(group.partitions.items())))


def _what(key: Any, result: Any) -> str:
    """``KEY [partition P] checkpoint ID (generation G, batch B)[ + N deltas applied, up to batch U]``: which
    state a restore brings, for the text output (``--json`` has the same as fields)."""
    cp, partition = result.checkpoint, result.partition
    batch = "" if cp.batch_id is None else f", batch {cp.batch_id}"
    text = (f"{key}{'' if partition is None else f' partition {partition}'} checkpoint {cp.checkpoint_id} "
            f"(generation {cp.generation}{batch})")
    deltas = result.deltas_applied
    if deltas:
        text += f" + {deltas} delta{'' if deltas == 1 else 's'} applied, up to batch {result.last_batch_id}"
    return text


def _rate(nbytes: int, ms: float) -> str:
    """Bytes over milliseconds in IEC units, as every size the CLI prints: ``95.3 MiB/s``."""
    from blobstate.config.units import format_size

    return f"{format_size(int(nbytes * 1000 / max(ms, 1e-3)))}/s"


def _files(n: int) -> str:
    return f"{n} file{'' if n == 1 else 's'}"
