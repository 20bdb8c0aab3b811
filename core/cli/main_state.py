"""``blobstate state get KEY``, ``blobstate state dump``, ``blobstate state changes``: a store's keys and values, and
its changes batch by batch, read from the repository (``blobstate.api.read_state``, ``blobstate.api.read_changes``).

Read only: each chain is restored into a private temporary directory and removed once read; nothing is written to
the repository or to a directory of yours. Keys and values print as the binding wrote them (see
``blobstate.restoring.entries``): in JSON lines a ``str``, ``int``, ``bool`` or finite ``float`` is itself, ``bytes``
is ``{"bytes": BASE64}``, a non-finite float ``{"float": "nan"}``, anything else (never unpickled)
``{"raw": BASE64}`` of the stored bytes; in CSV each key and value has a type column (``str``, ``bytes``, ``int``,
``float``, ``bool``, ``raw``) and bytes are base64. JSON escapes every non-ASCII character, and CSV on a terminal
shows control characters escaped (``blobstate.cli.output.safe``), so no key read from a repository sends escape
sequences to a terminal. A wrong ``--store`` is exit 5 naming the stores there are; a
batch retention no longer keeps is exit 5 naming the oldest readable batch. ``--checkpoint-location`` (the query's
Spark checkpoint location) reads the state after the batch Spark committed (``blobstate.model.align``); without it
the newest is read, and a warning on stderr says it may be a batch Spark re-runs.
"""

from __future__ import annotations

import base64
import csv
import json
import math
import sys
from collections.abc import Iterable
from typing import Any

import click

from blobstate.cli import exits, naming, output, params


def _format_option(fields: str) -> Any:
    return click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True,
                        help=f"JSON lines ({{{fields}}}) or CSV with type columns.")


@click.group(short_help="A store's keys and values: a key, every key, changes.")
def state() -> None:
    """A store's keys and values as data: one key, every key, or the changes between batches."""


def _store_options(fn: Any) -> Any:
    for decorator in reversed([
        params.repository_options, params.read_key_options,
        click.option("--partition", type=click.IntRange(0), default=None,
                     help="Of a partitioned store (group checkpoints): this partition only (default: every one)."),
        click.option("--checkpoint-location", default=None, metavar="PATH",
                     help="The query's Spark checkpoint location (a path or fsspec URL, read without Spark): read "
                          "the state after the batch Spark committed (default: the newest in the repository, which "
                          "may be a batch Spark re-runs)."),
    ]):
        fn = decorator(fn)
    return fn


def _at_options(fn: Any) -> Any:
    fn = click.option("--batch", "batch_id", type=click.IntRange(0), default=None,
                      help="The state exactly as after this batch (default: the newest).")(fn)
    return params.checkpoint_option(fn)


def _jsonable(value: Any) -> Any:
    from blobstate.restoring.entries import Undecoded

    if isinstance(value, Undecoded):
        return {"raw": base64.b64encode(value.data).decode()}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    return value


def _text(value: Any) -> str:
    """A value in one CSV cell or one line: a str as it is, bytes and raw as base64, others as JSON."""
    from blobstate.restoring.entries import Undecoded

    if isinstance(value, str):
        return value
    if isinstance(value, Undecoded | bytes):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value)


def _partitions(options: dict[str, Any], job: str, task: str | None, store: str | None,
                partition: int | None) -> tuple[Any, list[int | None]]:
    """The store the options name (found without ``--task`` as every reader finds it) and the partitions to read:
    ``partition``, every partition of a group, or None for a driver store."""
    from blobstate import api

    latest = api.require_store(**options, job=job, task=task, store=naming.require_store(store))
    if partition is not None:
        return latest.store_key, [partition]
    return latest.store_key, list(range(latest.num_partitions)) if latest.is_group else [None]


def _write(rows: Iterable[dict[str, Any]], fmt: str, columns: list[str]) -> int:
    """Print ``rows`` as JSON lines or CSV (a header, then a type column before each key and value)."""
    from blobstate.restoring.entries import type_name

    count = 0
    if fmt == "jsonl":
        for row in rows:
            click.echo(json.dumps({k: _jsonable(v) for k, v in row.items()}))  # \uXXXX: no control characters
            count += 1
        return count
    out = csv.writer(sys.stdout, lineterminator="\n")
    shown = output.safe if sys.stdout.isatty() else str  # a terminal never gets the data's escape sequences
    header = [c for name in columns for c in ((f"{name}_type", name) if name in ("key", "value") else (name,))]
    out.writerow(header)
    for row in rows:
        cells: list[Any] = []
        for name in columns:
            value = row[name]
            if name in ("key", "value"):
                cells += ["" if value is None else type_name(value), "" if value is None else shown(_text(value))]
            else:
                cells.append("" if value is None else value)
        out.writerow(cells)
        count += 1
    return count


@state.command(short_help="Print the value of one key.")
@click.argument("key_text", metavar="KEY")
@_store_options
@_at_options
@click.option("--key-type", type=click.Choice(["str", "int", "float", "bool", "bytes"]), default="str",
              show_default=True, help="The stored key's type (bytes: KEY in hex).")
@params.json_option
@exits.handle_errors
def get(key_text: str, repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...],
        job: str, task: str | None, store: str | None, partition: int | None, checkpoint_location: str | None,
        batch_id: int | None, checkpoint: str | None, key_type: str, as_json: bool) -> None:
    """Print the value of KEY (of a partitioned store: looked for in every partition, or in --partition) as of the
    newest state, --batch or --checkpoint. Exit 5 when no such key."""
    from blobstate import api
    from blobstate.errors import NothingToRestore

    wanted = _key(key_text, key_type)
    options = naming.repository(repo, log_url, storage_option, log_option)
    key, partitions = _partitions(options, job, task, store, partition)
    for p in partitions:
        for k, v in api.read_state(**options, job=key.job, task=key.task, store=key.store, partition=p,
                                   batch_id=batch_id, checkpoint=checkpoint,
                                   checkpoint_location=checkpoint_location):
            if type(k) is type(wanted) and k == wanted:
                output.emit(as_json, {"partition": p, "key": _jsonable(k), "value": _jsonable(v)}, _text(v))
                return
    at = f" after batch {batch_id}" if batch_id is not None else ""
    raise NothingToRestore(f"{key} holds no key {wanted!r}{at}")


def _key(text: str, key_type: str) -> Any:
    try:
        if key_type == "int":
            return int(text)
        if key_type == "float":
            return float(text)
        if key_type == "bytes":
            return bytes.fromhex(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not {'hex digits' if key_type == 'bytes' else 'a ' + key_type}",
                                 param_hint="KEY") from None
    if key_type == "bool":
        if text.lower() not in ("true", "false"):
            raise click.BadParameter(f"{text!r} is not true or false", param_hint="KEY")
        return text.lower() == "true"
    return text


@state.command(short_help="Print every key and value of the store.")
@_store_options
@_at_options
@_format_option("partition, key, value")
@click.option("--state-var", default=None, metavar="NAME",
              help="Of a stateful processor's store: this state variable's rows, as Spark's state data source's "
                   "stateVarName gives them (JSON lines {key, value | list_element | user_map_key, user_map_value, "
                   "partition_id}). Exit 2 naming the variables there are when there is no such variable.")
@click.option("--timers", is_flag=True, default=False,
              help="Of a stateful processor's store: its registered timers (JSON lines {key, "
                   "expiration_timestamp_ms, partition_id}), as Spark's readRegisteredTimers.")
@exits.handle_errors
def dump(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...], job: str,
         task: str | None, store: str | None, partition: int | None, checkpoint_location: str | None,
         batch_id: int | None, checkpoint: str | None, fmt: str, state_var: str | None, timers: bool) -> None:
    """Print every key and value of the store (of a partitioned store: partition by partition, or --partition) as
    of the newest state, --batch or --checkpoint, in the store's key order; with --state-var or --timers, a
    stateful processor's variable or timers, decoded (JSON lines only)."""
    from blobstate import api

    options = naming.repository(repo, log_url, storage_option, log_option)
    if state_var is not None or timers:
        _dump_processor(options, job, task, naming.require_store(store), state_var, timers, partition, batch_id,
                        checkpoint, checkpoint_location, fmt)
        return
    key, partitions = _partitions(options, job, task, store, partition)

    def rows() -> Iterable[dict[str, Any]]:
        for p in partitions:
            for k, v in api.read_state(**options, job=key.job, task=key.task, store=key.store, partition=p,
                                       batch_id=batch_id, checkpoint=checkpoint,
                                       checkpoint_location=checkpoint_location):
                yield {"partition": p, "key": k, "value": v}

    _write(rows(), fmt, ["partition", "key", "value"])


def _decoded(value: Any) -> Any:
    """A decoded state value as JSON: structs as objects, timestamps and dates ISO 8601, decimals as strings,
    bytes as ``{"bytes": BASE64}``."""
    import datetime as dt
    import decimal

    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_decoded(v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return _jsonable(value)


def _dump_processor(options: dict[str, Any], job: str, task: str | None, store: str, state_var: str | None,
                    timers: bool, partition: int | None, batch_id: int | None, checkpoint: str | None,
                    checkpoint_location: str | None, fmt: str) -> None:
    """``dump --state-var`` / ``--timers``: the rows of ``blobstate.spark.data.local.variable_rows``."""
    if state_var is not None and timers:
        raise click.UsageError("--state-var and --timers read different things: give one")
    if fmt != "jsonl":
        raise click.UsageError("--state-var and --timers print JSON lines (their values are structs)")
    from blobstate.spark.data.local import variable_rows

    rows = variable_rows(**options, job=job, task=task, store=store, state_var=state_var, timers=timers,
                         partition=partition, batch_id=batch_id, checkpoint=checkpoint,
                         checkpoint_location=checkpoint_location)
    for row in rows:
        click.echo(json.dumps(_decoded(row)))


@state.command(short_help="Print the writes of batches FROM..TO from the changelogs.")
@_store_options
@click.option("--from", "from_batch", type=click.IntRange(0), default=None,
              help="The first batch whose writes to print (default: the oldest retained).")
@click.option("--to", "to_batch", type=click.IntRange(0), default=None,
              help="The last batch whose writes to print (default: the newest).")
@_format_option("batchId, partition, op, key, value")
@exits.handle_errors
def changes(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...], job: str,
            task: str | None, store: str | None, partition: int | None, checkpoint_location: str | None,
            from_batch: int | None, to_batch: int | None, fmt: str) -> None:
    """Print the writes (put, delete) of batches --from..--to, both included, from the delta changelogs the
    repository retains: batch by batch, in each batch's order. Applied to the state after batch FROM - 1 they give
    the state after batch TO."""
    from blobstate import api

    found = api.read_changes(**naming.repository(repo, log_url, storage_option, log_option), job=job, task=task,
                             store=naming.require_store(store), from_batch=from_batch, to_batch=to_batch,
                             partition=partition, checkpoint_location=checkpoint_location)
    _write(({"batchId": c.batch_id, "partition": c.partition, "op": c.op, "key": c.key, "value": c.value}
            for c in found), fmt, ["batchId", "partition", "op", "key", "value"])
