"""``blobstate diff FROM [TO]``: what changed between two checkpoints of a store."""

from __future__ import annotations

import click

from blobstate.cli import exits, naming, output, params


@click.command(short_help="Files added, removed and changed between two checkpoints.")
@click.argument("base", metavar="FROM")
@click.argument("target", metavar="[TO]", required=False, default="latest")
@params.repository_options
@params.read_key_options
@click.option("--partition", type=click.IntRange(0), default=None,
              help="Of a partitioned store (group checkpoints): compare snapshots of this partition.")
@params.json_option
@exits.handle_errors
def diff(base: str, target: str, repo: str, log_url: str | None, storage_option: tuple[str, ...],
         log_option: tuple[str, ...], job: str, task: str | None, store: str | None, partition: int | None,
         as_json: bool) -> None:
    """Files added (+), removed (-) and changed (~) from checkpoint FROM to TO (default: latest). Each is latest,
    a checkpoint id, a unique prefix of one, or a generation number. A file counts as changed when its content,
    permission bits or mtime differ (a link: its target), never for its ctime alone."""
    from blobstate import api
    from blobstate.config.units import format_size

    result = api.diff(job=job, task=task, store=naming.require_store(store), base=base, target=target,
                      partition=partition,
                      **naming.repository(repo, log_url, storage_option, log_option))
    if as_json:
        output.emit(True, result.to_json(), "")
        return
    a, b = result.base.checkpoint, result.target.checkpoint
    lines = [f"+ {path} ({format_size(size)})" for path, size in result.added]
    lines += [f"- {path} ({format_size(size)})" for path, size in result.removed]
    lines += [f"~ {path} ({format_size(before)} -> {format_size(after)})" for path, before, after in result.changed]
    part = "" if partition is None else f" partition {partition}"
    lines.append(f"{a.store_key}{part}: generation {a.generation} ({a.checkpoint_id}) -> {b.generation} "
                 f"({b.checkpoint_id}): {len(result.added)} added, {len(result.removed)} removed, "
                 f"{len(result.changed)} changed, {result.unchanged} unchanged; {result.blobs_new} new blobs, "
                 f"{result.blobs_shared} shared")
    output.emit(False, None, "\n".join(lines))
