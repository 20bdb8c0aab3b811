"""``blobstate list``: the retained checkpoints of a store, or of every store in the repository, with their time,
writer host, batch id, file count and data size (from the snapshot indexes)."""

from __future__ import annotations

from typing import Any

import click

from blobstate.cli import exits, naming, output, params


@click.command("list", short_help="List retained checkpoints of one store or of every store.")
@params.repository_options
@params.concurrency_option
@params.filter_options
@params.json_option
@exits.handle_errors
def list_checkpoints(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...],
                     max_concurrency: int, job: str | None, task: str | None, store: str | None,
                     as_json: bool) -> None:
    """List retained checkpoints: time (UTC), host, batch id, files and data size, of one store (--store) or of
    every store in the repository (optionally of one --job / --task). A group checkpoint (a partitioned store)
    shows the partitions it commits of all (parts), the files of its partition snapshots (delta: changelogs
    only) and its data size, and, when it records them (standby=1), a line per partition: the executor of its
    primary copy at the group's batch and its warm standby's with the batch that copy is at."""
    from blobstate import api
    from blobstate.config.units import format_size

    summaries = api.describe_checkpoints(job=job, task=task, store=store, max_concurrency=max_concurrency,
                                         **naming.repository(repo, log_url, storage_option, log_option))

    def lines(s: Any) -> list[str]:
        row = s.to_json()
        batch = "" if row["batchId"] is None else row["batchId"]
        cp = s.checkpoint
        parts = f"{s.partitions_committed}/{cp.num_partitions}" if cp.is_group else ""
        files = ("delta" if cp.is_delta or (cp.is_group and s.files_total is None)
                 else "?" if s.files_total is None else s.files_total)
        return [f"{row['store']:28} {row['generation']:>4} {row['checkpointId']:22} {row['createdTime']:24} "
                f"{row['host'][:16]:16} {batch!s:>6} {parts:>7} {files!s:>7} {format_size(s.bytes_total):>10}"
                + (f"  {cp.key_groups} key groups" if cp.is_group and cp.key_groups else "")
                + (f", regrouped {s.regrouped_from} -> {cp.num_partitions}" if s.regrouped_from else "")
                + (f"  error: {s.error}" if s.error else "")] + [replica_line(r, cp.batch_id) for r in cp.replicas]

    output.show_rows(as_json, summaries, empty="no checkpoints", lines=lines,
                     header=f"{'store':28} {'gen':>4} {'checkpoint':22} {'created (UTC)':24} {'host':16} "
                            f"{'batch':>6} {'parts':>7} {'files':>7} {'size':>10}")


def replica_line(replica: Any, batch: int | None) -> str:
    """A group record's ``Replica`` as ``blobstate list`` shows it under the record."""
    standby = "none" if not replica.standby else (
        f"{replica.standby} at batch {'?' if replica.standby_batch_id is None else replica.standby_batch_id}")
    return (f"    partition {replica.partition:<4} primary {replica.primary or '?'} at batch "
            f"{'?' if batch is None else batch}, standby {standby}")
