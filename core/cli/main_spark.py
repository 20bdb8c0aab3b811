"""``blobstate spark rescale``: re-partition a committed group (partitioned Spark state) into another number of
partitions, offline, with Spark's own hash (``blobstate.spark.rescale``). Needs the ``spark`` extra (pyspark) and
Java 17.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from blobstate.cli import exits, naming, output, params


@click.group(short_help="Partitioned Spark state, with the query stopped.")
def spark() -> None:
    """Partitioned Spark state: operations run with the streaming query stopped."""


def _key_of(value: str) -> Any:
    """``module:function`` -> the function (importable on the executors too)."""
    module_name, sep, attr = value.partition(":")
    if not sep or not module_name or not attr:
        raise click.BadParameter(f"{value!r} is not module:function", param_hint="--key-of")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"cannot import {value!r}: {exc}", param_hint="--key-of") from None
    if not callable(fn):
        raise click.BadParameter(f"{value!r} is not callable", param_hint="--key-of")
    return fn


@spark.command(short_help="Rewrite a partitioned store's state as M partitions.")
@params.repository_options
@click.option("--job", required=True, envvar="BLOBSTATE_JOB", help="Job name of the partitioned store.")
@click.option("--task", default="group", show_default=True, envvar="BLOBSTATE_TASK",
              help="Task name of the partitioned store.")
@click.option("--store", required=True, envvar="BLOBSTATE_STORE", help="The committed group to re-partition.")
@click.option("--to-store", required=True, help="The new group's store name (must hold no checkpoint yet).")
@click.option("--partitions", type=click.IntRange(1), required=True, help="The new number of partitions M.")
@click.option("--key-schema", required=True, metavar="DDL",
              help="The key columns as a Spark DDL schema, in the query's key_cols order: 'origin string, dest "
                   "string' (Spark's hash depends on the types).")
@click.option("--key-cols", default=None, metavar="A,B",
              help="The query's key_cols, comma-separated (a check: they must be --key-schema's columns).")
@click.option("--key-of", "key_of", required=True, metavar="MODULE:FUNCTION",
              help="A function mapping a stored key to its key-column values (a tuple), importable on the "
                   "executors: e.g. blobstate.spark.demo.flights:route_of.")
@click.option("--checkpoint-location", default=None, metavar="PATH",
              help="The query's Spark checkpoint location: rescale the state of Spark's last committed batch "
                   "(recommended; default: --batch, else the newest group record, which may be a batch Spark "
                   "re-runs).")
@click.option("--batch", "batch_id", type=click.IntRange(0), default=None, help="Rescale the state after this batch.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master of the session to run on.")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", help="Spark configuration (repeatable).")
@click.option("--local-dir", default=None, type=click.Path(file_okay=False),
              help="Scratch directory on the executors (default: their temporary directory).")
@click.option("--ttl", "ttl_ms", type=params.Duration(), default=None, envvar="BLOBSTATE_TTL",
              help="TTL of the uploaded blobs until the group commits (default 1d).")
@params.work_dir_option
@params.json_option
@exits.handle_errors
def rescale(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...], job: str,
            task: str, store: str, to_store: str, partitions: int, key_schema: str, key_cols: str | None,
            key_of: str, checkpoint_location: str | None, batch_id: int | None, master: str, conf: tuple[str, ...],
            local_dir: str | None, ttl_ms: int | None, work_dir: str | None, as_json: bool) -> None:
    """Write the state of the committed group --store (N partitions) as a new group --to-store of --partitions M,
    every key in partition pmod(hash(key columns), M) as Spark computes it; one group record, the source's batch
    and query id. Restart the query on the same checkpoint location with store=TO_STORE and num_partitions=M.
    Exit 2 when the destination holds checkpoints or a key cannot be mapped (nothing committed), 5 when there is
    no group to re-partition."""
    from blobstate.model.layout import DEFAULT_TTL_MS

    fn = _key_of(key_of)
    options = naming.repository(repo, log_url, storage_option, log_option)
    from blobstate.plugin.records import extra_install_hint

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise click.ClickException("spark rescale needs pyspark: " + extra_install_hint("spark")) from None
    from blobstate.spark.data.rescale import rescale as run_rescale

    builder = SparkSession.builder.master(master).appName("blobstate-rescale")
    for pair in conf:
        name, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--conf")
        builder = builder.config(name, value)
    try:  # a session this process already runs is used and left running; one made here is stopped at the end
        SparkSession.active()
        created = False
    except Exception:  # noqa: BLE001 - pyspark raises its own error class when there is none
        created = True
    session = builder.getOrCreate()
    try:
        result = run_rescale(session, repo=repo, job=job, task=task, store=store, to_store=to_store,
                             num_partitions=partitions, key_schema=key_schema, key_of=fn,
                             key_cols=key_cols.split(",") if key_cols else None, batch_id=batch_id,
                             checkpoint_location=checkpoint_location, log_url=log_url,
                             storage_options=options["storage_options"],
                             log_options=options["log_options"], local_dir=local_dir,
                             ttl_ms=ttl_ms or DEFAULT_TTL_MS, settings=options["settings"])
    finally:
        if created:
            session.stop()
    output.emit(as_json, result.to_json(),
                f"rescaled {result.source} ({result.from_partitions} partitions) to {result.target} "
                f"({result.to_partitions} partitions) at batch {result.batch_id}: {result.keys} keys "
                f"({', '.join(map(str, result.keys_per_partition))}), checkpoint {result.checkpoint.checkpoint_id}\n"
                f"restart the query with store={to_store!r}, num_partitions={result.to_partitions} on the same "
                "checkpoint location")
    if not result.confirmed and batch_id is None and result.query_id:
        from blobstate.model.align import UNCONFIRMED

        click.echo(f"note: batch {result.batch_id} is the newest group record's: {UNCONFIRMED}", err=True)
