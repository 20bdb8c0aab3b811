"""``blobstate ls``: the files of one snapshot, with size, CRC32C and number of blobs."""

from __future__ import annotations

import click

from blobstate.cli import exits, naming, output, params


@click.command(short_help="List the files of a snapshot (default: the latest).")
@click.argument("prefix", required=False, default="")
@params.repository_options
@params.read_key_options
@params.checkpoint_option
@click.option("--partition", type=click.IntRange(0), default=None,
              help="Of a partitioned store (group checkpoints): this partition's snapshot.")
@params.json_option
@exits.handle_errors
def ls(prefix: str, repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...],
       job: str, task: str | None, store: str | None, checkpoint: str | None, partition: int | None,
       as_json: bool) -> None:
    """List the files of a snapshot (default: the latest; only paths starting with PREFIX if given); of a
    partitioned store, of one partition (--partition: the snapshot its state starts from)."""
    from blobstate import api
    from blobstate.config.units import format_size, iso_time

    listing = api.ls(job=job, task=task, store=naming.require_store(store), checkpoint=checkpoint, prefix=prefix,
                     partition=partition, **naming.repository(repo, log_url, storage_option, log_option))
    if as_json:
        output.emit(True, listing.to_json(), "")
        return
    cp = listing.summary.checkpoint
    part = "" if partition is None else f" partition {partition}"
    n = listing.deltas_after
    after = f"; its latest state replays {n} delta{'' if n == 1 else 's'} on top" if n else ""
    files = listing.summary.files_total
    output.err(f"{cp.store_key}{part} checkpoint {cp.checkpoint_id} (generation {cp.generation}, batch "
               f"{cp.batch_id}, {iso_time(cp.created_time_ms)}): {files} file{'' if files == 1 else 's'}, "
               f"{format_size(listing.summary.bytes_total)}{after}")
    lines = [f"{f.size_in_bytes:>14} {f.crc32c:#010x} {len(f.blobs):>4}  {path}" for path, f in listing.files]
    if lines:
        output.emit(False, None, "\n".join(lines))
