"""``blobstate doctor --repo URL``: the checks an operator runs first (endpoint, bucket, marker and log, clock skew,
the store's semantics, open commits, what gc would do, checkpoint ages), each a line with ok / warn / fail."""

from __future__ import annotations

import click

from blobstate.cli import exits, naming, output, params
from blobstate.model.layout import DEFAULT_TTL_MS


@click.command(short_help="Check the repository, its checkpoint log and this host.")
@params.repository_options
@params.work_dir_option
@click.option("--ttl", type=params.Duration(), default=DEFAULT_TTL_MS, show_default="1d", envvar="BLOBSTATE_TTL",
              help="The TTL the writers use: a clock skew beyond a quarter of it fails.")
@params.json_option
@exits.handle_errors
def doctor(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...],
           work_dir: str | None, ttl: int, as_json: bool) -> None:
    """Check the repository, its checkpoint log and this host: one line per check (ok, warn, fail); exit 1 when a
    check fails, 3 when the key of an encrypted repository does not open it (checked before anything is written).
    Writes only a few scratch objects under doctor/ in the repository, and removes them."""
    from blobstate.maintenance import doctor as checks

    report = checks.run(work_base=work_dir, ttl_ms=ttl, **naming.repository(repo, log_url, storage_option,
                                                                            log_option))
    width = max(len(c.name) for c in report.checks)
    text = "\n".join(f"{c.status:<4}  {c.name:<{width}}  {c.detail}" for c in report.checks)
    output.emit(as_json, report.to_json(), text)
    if report.exit_code:
        raise SystemExit(report.exit_code)
