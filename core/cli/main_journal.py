"""``blobstate journal show``: print a store's journal events (and a torn tail, if any)."""

from __future__ import annotations

import json

import click

from blobstate.cli import command_settings, exits, naming, output, params


@click.group(short_help="Inspect a store's commit journal.")
def journal() -> None:
    """Inspect a store's commit journal."""


@journal.command("show", short_help="Print a store's journal events and each commit's phase.")
@click.option("--repo", default=None, envvar="BLOBSTATE_REPO",
              help="Repository URL (with the key options, to find the work directory).")
@params.key_file_option
@params.key_options
@params.work_dir_option
@click.option("--journal", "journal_dir", default=None, type=click.Path(file_okay=False),
              help="The store's work directory holding journal.log.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@exits.handle_errors
def show(repo: str | None, job: str, task: str, store: str | None, work_dir: str | None, journal_dir: str | None,
         as_json: bool) -> None:
    """Print the journal's events (and a torn tail, if any), then each commit's phase, or "no open commit"; exit 3
    when it is damaged in the middle, 5 for a store the repository holds no checkpoint of (and this host no
    journal)."""
    from blobstate import api
    from blobstate.config.units import iso_time
    from blobstate.errors import CorruptJournalError
    from blobstate.journal.events import event_to_dict
    from blobstate.journal.projection import project

    if journal_dir is None and repo is None:
        raise click.UsageError("give --journal DIR, or --repo with the store key options")
    where = ({"work_dir": journal_dir} if journal_dir is not None
             else {"repo": repo, "key": naming.store_key(job, task, store), "work_base": work_dir})
    where["settings"] = command_settings.settings()
    try:
        api.journal_events(**where)
        corrupt = None
    except CorruptJournalError as exc:
        corrupt = exc
    result = api.journal_events(**where, strict=False)
    for event in result.events:
        doc = event_to_dict(event)
        if as_json:
            click.echo(json.dumps(doc))
        else:
            rest = " ".join(f"{k}={v}" for k, v in doc.items() if k not in ("type", "v", "commit_id", "time_ms"))
            click.echo(output.safe(f"{iso_time(event.time_ms)} {event.commit_id} {event.type_name} {rest}"[:300]))
    if not result.events and corrupt is None and journal_dir is None:  # nothing here: a store at all? (exit 5)
        api.require_store(repo=repo, key=where["key"], settings=where["settings"])
    states = project(result.events).values()
    for state in states:
        output.err(f"commit {state.commit_id}: {state.phase.name}")
    if not any(state.is_open for state in states):
        output.err("no open commit" + ("" if journal_dir is not None else f" of {where['key']} on this host"))
    if corrupt is not None:
        raise corrupt  # the events before the damage are printed above; exit code 3
    if result.torn is not None:
        output.err(f"torn tail ignored: {result.torn.length} bytes at offset {result.torn.offset} "
                   f"({result.torn.reason})")
