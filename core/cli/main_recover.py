"""``blobstate recover``: the journal replay tool (finish committed commits, abort uncommitted ones)."""

from __future__ import annotations

from typing import Any

import click

from blobstate.cli import common


@click.command()
@common.repo_options
@common.work_dir_option
@common.key_options
@click.option("--journal", "journal_dir", default=None, type=click.Path(file_okay=False),
              help="The store's work directory holding journal.log (default: derived from repo and key).")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@common.json_option
@common.handle_errors
def recover(repo: str, log_url: str | None, storage_option: tuple[str, ...], work_dir: str | None, job: str,
            task: str, store: str | None, journal_dir: str | None, dry_run: bool, as_json: bool) -> None:
    """Replay the journal: finish committed commits, abort uncommitted ones (the recovery replay tool)."""
    from blobstate import api

    key = common.store_key(job, task, store)
    rows: list[dict[str, Any]] = []

    def report(action: Any, outcome: str) -> None:
        state = action.state
        rows.append({"commitId": state.commit_id, "state": state.phase.name, "action": action.name,
                     "reason": action.reason, "blobs": len(state.blob_ids), "outcome": outcome})
        if not as_json:
            click.echo(f"{state.commit_id}: {state.phase.name} -> {action.name} ({action.reason}); {outcome}")

    api.recover(repo=repo, key=key, log=log_url, work_dir=journal_dir or common.store_work_dir(work_dir, repo, key),
                dry_run=dry_run, storage_options=common.storage_options(storage_option), report=report)
    if as_json:
        common.emit(True, rows, "")
    elif not rows:
        click.echo(f"{key}: nothing to recover")
