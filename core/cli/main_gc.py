"""``blobstate gc``: expired TTL blobs and orphans over every store of a repository; the cloud lifecycle rule."""

from __future__ import annotations

import click

from blobstate.cli import common


@click.command()
@common.repo_options
@common.ttl_mode_option
@common.work_dir_option
@click.option("--dry-run", is_flag=True, help="Show what would be deleted; delete nothing.")
@click.option("--ttl", "ttl_ms", type=click.IntRange(1), default=None,
              help="Orphans older than this (ms) are deleted (default: the blob TTL, 1 day).")
@click.option("--retain", type=click.IntRange(1), default=None,
              help="Checkpoints kept (default: the retention each store's writer recorded).")
@click.option("--install-lifecycle", is_flag=True,
              help="Install the cloud lifecycle rule for native TTL (or print it where the API does not allow it).")
@click.option("--now", "now_ms", type=int, default=None, hidden=True, help="Current time in ms (tests).")
@common.json_option
@common.handle_errors
def gc(repo: str, log_url: str | None, storage_option: tuple[str, ...], ttl_mode: str | None, work_dir: str | None,
       dry_run: bool, ttl_ms: int | None, retain: int | None, install_lifecycle: bool, now_ms: int | None,
       as_json: bool) -> None:
    """Delete expired TTL blobs and orphans no retained snapshot references (only once older than the TTL)."""
    from blobstate import api
    from blobstate.layout import DEFAULT_TTL_MS

    options = common.storage_options(storage_option)
    if install_lifecycle:
        rule, installed = api.lifecycle_rule(repo=repo, ttl_ms=ttl_ms or DEFAULT_TTL_MS, storage_options=options,
                                             install=not dry_run)
        if rule is None:
            common.err("this blob store has no lifecycle rule: TTL is kept as leases, swept by `blobstate gc`")
        elif installed:
            common.err("lifecycle rule installed")
        else:
            common.err("install this lifecycle rule with your cloud's management API:")
            click.echo(rule)
        return
    reports = api.gc(repo=repo, log=log_url, dry_run=dry_run, ttl_ms=ttl_ms or DEFAULT_TTL_MS, retain=retain,
                     now_ms=now_ms, storage_options=options, ttl_mode=ttl_mode, work_base=work_dir)
    if as_json:
        common.emit(True, [r.to_json() for r in reports], "")
        return
    verb = "would delete" if dry_run else "deleted"
    for r in reports:
        if r.skipped:
            click.echo(f"{r.key}: skipped: {r.skipped}")
            continue
        if r.foreign:
            click.echo(f"{r.key}: {len(r.foreign)} object(s) named by this store's leases or found under its prefix "
                       "belong to no store of ours: left alone")
        if r.key is None:
            click.echo(f"checkpoints/: {verb} {len(r.temporaries_deleted)} temporary files of interrupted writes")
        else:
            click.echo(f"{r.key}: {verb} {len(r.expired_deleted)} expired, {len(r.orphans_deleted)} orphans; "
                       f"{len(r.expired_healed)} expired but referenced (TTL removed)")
        for blob_id in r.expired_deleted + r.orphans_deleted + r.temporaries_deleted:
            click.echo(f"  {blob_id}")
