"""``blobstate gc``: expired TTL blobs and orphans over every store of a repository; the cloud lifecycle rule.

The text lists exactly what ``--json`` lists (every blob and checkpoint, per store), with or without ``--dry-run``.
"""

from __future__ import annotations

from typing import Any

import click

from blobstate.cli import command_settings, exits, naming, output, params
from blobstate.model.layout import DEFAULT_TTL_MS, RECORDS

#: JSON field -> how the text names one entry of it.
TEXT_LABELS = {"expiredDeleted": "expired", "orphansDeleted": "orphan", "expiredHealed": "healed",
               "checkpointsPruned": "checkpoint", "temporariesDeleted": "temporary",
               "foreign": "not this store's (left alone)",
               "spared": "spared (referenced or protected again when re-checked before deleting)"}


def render_text(reports: list[dict[str, Any]], dry_run: bool) -> str:
    """The text form of ``gc --json``'s reports: a summary line per store, then one line per entry."""
    would = "would " if dry_run else ""
    lines = []
    for r in reports:
        if r["skipped"]:
            lines.append(f"{r['store']}: skipped: {r['skipped']}")
            continue
        if r["store"] is None:  # the repository's own leftovers: temp files of interrupted exclusive creates
            lines.append(f"{RECORDS}/: {would}delete {len(r['temporariesDeleted'])} temporary files")
            lines += [f"  temporary {entry}" for entry in r["temporariesDeleted"]]
            continue
        lines.append(f"{r['store']}: {would}delete {len(r['expiredDeleted'])} expired and "
                     f"{len(r['orphansDeleted'])} orphaned blobs, {would}prune {len(r['checkpointsPruned'])} "
                     f"checkpoint(s); {len(r['expiredHealed'])} expired but referenced ({would}remove their TTL)")
        default = r.get("retentionNote") or "none recorded: every checkpoint is kept"
        lines.append(f"  retention: {r['retention'] or default}")
        for field, label in TEXT_LABELS.items():
            lines += [f"  {label} {entry}" for entry in r[field]]
        lines += [f"  keep {k['checkpointId']} (generation {k['generation']}"
                  f"{'' if k['batchId'] is None else ', batch ' + str(k['batchId'])}): {', '.join(k['reasons'])}"
                  for k in r["checkpointsKept"]]
    return "\n".join(lines)


@click.command(short_help="Delete expired and orphan blobs; prune past the retention.")
@params.repository_options
@params.ttl_mode_option
@params.concurrency_option
@params.work_dir_option
@params.filter_options
@click.option("--dry-run", is_flag=True, help="Show what would be deleted; delete nothing.")
@click.option("--ttl", type=params.Duration(), default=DEFAULT_TTL_MS, show_default="1d", envvar="BLOBSTATE_TTL",
              help="Orphans older than this are deleted (1d, 12h, 90s; a number is ms).")
@click.option("--retain", type=click.IntRange(1), default=None, envvar="BLOBSTATE_RETAIN",
              help="Checkpoints kept (default: the retention each store's writer recorded).")
@params.keep_options
@click.option("--install-lifecycle", is_flag=True,
              help="Install the cloud lifecycle rule for native TTL (or print it where the API does not allow it).")
@click.option("--now", "now_ms", type=int, default=None, hidden=True, help="Current time in ms (tests).")
@params.json_option
@exits.handle_errors
def gc(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...],
       ttl_mode: str | None, max_concurrency: int, work_dir: str | None, job: str | None, task: str | None,
       store: str | None, dry_run: bool, ttl: int, retain: int | None, keep_within: str | None,
       keep_last: int | None, keep_hourly: int | None, keep_daily: int | None, keep_weekly: int | None,
       keep_monthly: int | None, keep_yearly: int | None, install_lifecycle: bool, now_ms: int | None,
       as_json: bool) -> None:
    """Delete expired TTL blobs and orphans no retained snapshot references (only once older than the TTL), and
    prune checkpoints beyond the retention, in every store (or the --store / --job / --task given).

    Retention: --retain / --keep-* (restic's forget rules), else the policy each store's writer recorded; every
    checkpoint kept is listed with the rule that keeps it ("keep ID (generation N): daily, last")."""
    from blobstate import api

    options = naming.storage_options(storage_option)
    if install_lifecycle:
        rule, installed = api.lifecycle_rule(repo=repo, ttl=ttl, storage_options=options, install=not dry_run,
                                             settings=command_settings.settings())
        if rule is None:
            output.err("this blob store has no lifecycle rule: TTL is kept as leases, swept by `blobstate gc`")
        elif installed:
            output.err("lifecycle rule installed")
        else:
            output.err("install this lifecycle rule with your cloud's management API:")
            click.echo(rule)
        return
    reports = api.gc(repo=repo, log=log_url, job=job, task=task, store=store, dry_run=dry_run, ttl=ttl,
                     retention=params.retention_policy(), now_ms=now_ms, storage_options=options,
                     log_options=naming.log_options(log_option), ttl_mode=ttl_mode, work_base=work_dir,
                     max_concurrency=max_concurrency, settings=command_settings.settings())
    payload = [r.to_json() for r in reports]
    output.emit(as_json, payload, render_text(payload, dry_run) or "no stores")
