"""``blobstate recover``: the journal replay tool (finish committed commits, resolve unknown appends, abort the rest).

With no options it recovers every store of this host's work directory that has an open commit, each against the
repository and checkpoint log its journal records (credentials from the environment and fsspec's configuration, as
for every command): after a crash an operator need not know what the host was writing. ``--repo``, ``--job``,
``--task`` and ``--store`` narrow it; ``--journal DIR`` names one store's work directory.
"""

from __future__ import annotations

from typing import Any

import click

from blobstate.cli import command_settings, exits, naming, output, params


@click.command(short_help="Replay journals: finish or abort the open commits.")
@click.option("--repo", default=None, envvar="BLOBSTATE_REPO",
              help="Only stores of this repository (default: every store with an open commit).")
@click.option("--log", "log_url", default=None, envvar="BLOBSTATE_LOG",
              help="Checkpoint log URL (default: the one the journal records).")
@click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
              help="fsspec storage option for the repository (repeatable).")
@params.key_file_option
@params.work_dir_option
@click.option("--job", default=None, envvar="BLOBSTATE_JOB", help="Only this job's stores.")
@click.option("--task", default=None, envvar="BLOBSTATE_TASK", help="Only this task's stores.")
@click.option("--store", default=None, envvar="BLOBSTATE_STORE", help="Only stores of this name.")
@click.option("--journal", "journal_dir", default=None, type=click.Path(file_okay=False),
              help="One store's work directory holding journal.log (with --repo and --store).")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@params.json_option
@exits.handle_errors
def recover(repo: str | None, log_url: str | None, storage_option: tuple[str, ...], work_dir: str | None,
            job: str | None, task: str | None, store: str | None, journal_dir: str | None, dry_run: bool,
            as_json: bool) -> None:
    """Replay journals: finish committed commits, resolve appends of unknown outcome, abort uncommitted ones."""
    from blobstate import api

    rows: list[dict[str, Any]] = []

    def report(key: Any, action: Any, outcome: str) -> None:
        state = action.state
        rows.append({"store": str(key), "commitId": state.commit_id, "state": state.phase.name,
                     "action": action.name, "reason": action.reason, "blobs": len(state.blob_ids),
                     "outcome": outcome})
        if not as_json:
            click.echo(f"{key} {state.commit_id}: {state.phase.name} -> {action.name} ({action.reason}); {outcome}")

    options = naming.storage_options(storage_option)
    if journal_dir is not None:
        if repo is None or store is None:
            raise click.UsageError("--journal needs --repo and --store")
        key = naming.store_key(job or "default", task or "0", store)
        api.recover(repo=repo, job=key.job, task=key.task, store=key.store, log=log_url, work_dir=journal_dir,
                    dry_run=dry_run, storage_options=options, settings=command_settings.settings(),
                    report=lambda action, outcome: report(key, action, outcome))
    else:
        api.recover_all(work_base=work_dir, repo=repo, log=log_url, job=job, task=task, store=store,
                        storage_options=options, dry_run=dry_run, report=report, settings=command_settings.settings())
    if as_json:
        output.emit(True, rows, "")
    elif not rows:
        click.echo("nothing to recover")
