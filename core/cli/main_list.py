"""``blobstate list``: the retained checkpoints of a store, or of every store in the repository."""

from __future__ import annotations

import click

from blobstate.cli import common


@click.command("list")
@common.repo_options
@common.key_options
@common.json_option
@common.handle_errors
def list_checkpoints(repo: str, log_url: str | None, storage_option: tuple[str, ...], job: str, task: str,
                     store: str | None, as_json: bool) -> None:
    """List the retained checkpoints of a store (or, without --store, every store key in the repository)."""
    from blobstate import api
    from blobstate.model import StoreKey

    options = common.storage_options(storage_option)
    keys = (api.list_stores(repo=repo, log=log_url, storage_options=options) if store is None
            else [StoreKey(job, task, store)])
    rows = [{"store": str(key), **cp.to_json()}
            for key in keys for cp in api.list_checkpoints(repo=repo, log=log_url, key=key, storage_options=options)]
    if as_json:
        common.emit(True, rows, "")
        return
    if not rows:
        common.err("no checkpoints")
        return
    click.echo(f"{'store':30} {'gen':>5} {'checkpoint':28} {'batch':>6} {'index size':>10}")
    for r in rows:
        batch = "" if r["batchId"] is None else r["batchId"]
        click.echo(f"{r['store']:30} {r['generation']:>5} {r['checkpointId']:28} {batch!s:>6} "
                   f"{r['indexSizeInBytes']:>10}")
