"""The ``blobstate`` command line (click). Results on stdout (``--json`` for scripts), everything else on stderr.

Exit codes: 0 ok, 1 error, 2 usage, 3 integrity (checksum, corrupt index or journal, missing blob, unsafe path),
4 fenced, 5 nothing to restore. The shared options also come from the environment: ``BLOBSTATE_REPO``,
``BLOBSTATE_LOG``, ``BLOBSTATE_JOB``, ``BLOBSTATE_TASK``, ``BLOBSTATE_STORE``, ``BLOBSTATE_TTL_MODE``,
``BLOBSTATE_MAX_CONCURRENCY``, ``BLOBSTATE_WORK_DIR`` (and ``BLOBSTATE_STORAGE_OPTIONS`` as JSON).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from blobstate.errors import EXIT_ERROR, EXIT_USAGE, BlobstateError, ConfigurationError, CorruptJournalError
from blobstate.model import StoreKey

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def _err(message: str) -> None:
    click.echo(message, err=True)


_SECRETS: list[str] = []  # secret option values given on this command line, hidden in every message


def _redact(text: str) -> str:
    from blobstate.storage_options import redact

    return str(redact(text, secrets=_SECRETS))


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn blobstate errors into ``error: ...`` on stderr and their exit codes (tracebacks with BLOBSTATE_DEBUG)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except BlobstateError as exc:
            if os.environ.get("BLOBSTATE_DEBUG"):
                raise
            _err(f"error: {type(exc).__name__}: {_redact(str(exc))}")
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            _err("interrupted")
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
            if os.environ.get("BLOBSTATE_DEBUG"):
                raise
            _err(f"error: unexpected {type(exc).__name__}: {_redact(str(exc))} (BLOBSTATE_DEBUG=1 for a traceback)")
            sys.exit(EXIT_ERROR)

    return wrapper


def parse_storage_options(values: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs to a dict (typed values, dotted keys nest; see ``blobstate.storage_options``)."""
    from blobstate.storage_options import parse_options, secret_values

    options = parse_options(values)
    _SECRETS.extend(secret_values(options))
    return options


def repo_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by every command that opens a repository."""
    decorators = [
        click.option("--repo", required=True, envvar="BLOBSTATE_REPO",
                     help="Repository URL or path (file://, s3://, gs://, az://, ...)."),
        click.option("--log", "log_url", default=None, envvar="BLOBSTATE_LOG",
                     help="Checkpoint log URL (default: the file log inside the repository)."),
        click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
                     help="fsspec storage option for the repository (repeatable)."),
        click.option("--ttl-mode", type=click.Choice(["lease", "native"]), default=None, envvar="BLOBSTATE_TTL_MODE",
                     help="How blob TTLs are kept (default: lease)."),
        click.option("--max-concurrency", type=click.IntRange(1, 256), default=8, show_default=True,
                     envvar="BLOBSTATE_MAX_CONCURRENCY",
                     help="Parallel transfers."),
        click.option("--work-dir", default=None, envvar="BLOBSTATE_WORK_DIR",
                     help="Work directory base (journal, local checkpoints)."),
    ]
    for decorator in reversed(decorators):
        fn = decorator(fn)
    return fn


def key_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    decorators = [
        click.option("--job", default="default", show_default=True, envvar="BLOBSTATE_JOB",
                     help="Job name (store key part 1)."),
        click.option("--task", default="0", show_default=True, envvar="BLOBSTATE_TASK",
                     help="Task name (store key part 2)."),
        click.option("--store", default=None, envvar="BLOBSTATE_STORE",
                     help="Store name (store key part 3; default: the directory name)."),
    ]
    for decorator in reversed(decorators):
        fn = decorator(fn)
    return fn


def _work_dir(base: str | None, repo: str, key: StoreKey) -> str | None:
    if base is None:
        return None
    from blobstate.backends import normalize_url
    from blobstate.workdir import store_work_dir

    return store_work_dir(normalize_url(repo), key, base)


def _key(job: str, task: str, store: str | None, directory: str | None = None) -> StoreKey:
    if store is None:
        if directory is None:
            raise click.UsageError("--store is required here")
        store = os.path.basename(os.path.abspath(directory).rstrip("/"))
    return StoreKey(job, task, store)


def _emit(as_json: bool, payload: Any, text: str) -> None:
    click.echo(json.dumps(payload, indent=2) if as_json else text)


def _progress(quiet: bool) -> Any:
    from blobstate.progress import RichProgress

    return RichProgress(enabled=not quiet)


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="blobstate")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
def main(verbose: int) -> None:
    """blobstate: incremental, crash-safe backups of stream-processing state to blob stores."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


@main.command()
@click.argument("store_dir", type=click.Path(exists=True, file_okay=False))
@repo_options
@key_options
@click.option("--store-type", default=None, help="Local store type (rocksdb, dir, ...); default: detected.")
@click.option("--batch-id", type=click.IntRange(0), default=None, help="Stream batch id to record.")
@click.option("--ttl", "ttl_ms", type=click.IntRange(1), default=None, help="Blob TTL in ms (default: 1 day).")
@click.option("--retain", type=click.IntRange(1), default=3, show_default=True, help="Checkpoints kept.")
@click.option("--chunk-size", type=click.IntRange(1), default=64 << 20, show_default=True, help="Bytes per blob.")
@click.option("--expected-generation", type=click.IntRange(0), default=None,
              help="Fence against this generation instead of the log's latest (for orchestrators).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@handle_errors
def backup(store_dir: str, repo: str, log_url: str | None, storage_option: tuple[str, ...], ttl_mode: str | None,
           max_concurrency: int, work_dir: str | None, job: str, task: str, store: str | None,
           store_type: str | None, batch_id: int | None, ttl_ms: int | None, retain: int, chunk_size: int,
           expected_generation: int | None, as_json: bool, quiet: bool) -> None:
    """Back up STORE_DIR as a new committed snapshot; prints the checkpoint id on stdout."""
    from blobstate import api
    from blobstate.repository import DEFAULT_TTL_MS

    key = _key(job, task, store, store_dir)
    result = api.backup(
        store_dir, repo=repo, log=log_url, job=key.job, task=key.task, store=key.store, store_type=store_type,
        batch_id=batch_id, ttl_ms=ttl_ms or DEFAULT_TTL_MS, retain=retain, chunk_size=chunk_size,
        max_concurrency=max_concurrency, storage_options=parse_storage_options(storage_option), ttl_mode=ttl_mode,
        work_dir=_work_dir(work_dir, repo, key), progress=_progress(quiet), expected_generation=expected_generation,
    )
    if not quiet and not as_json:
        _err(f"committed {key} generation {result.checkpoint.generation}: {result.files_uploaded}/"
             f"{result.files_total} files, {result.bytes_uploaded} of {result.bytes_total} bytes uploaded in "
             f"{result.duration_ms:.0f} ms")
    _emit(as_json, result.to_json(), result.checkpoint.checkpoint_id)


@main.command()
@click.argument("dest_dir", type=click.Path(file_okay=False))
@repo_options
@key_options
@click.option("--checkpoint", "checkpoint_id", default=None, help="Checkpoint id (default: the latest).")
@click.option("--max-batch-id", type=click.IntRange(0), default=None,
              help="Restore the newest checkpoint whose batch id is <= this.")
@click.option("--store-type", default=None, help="Local store type (default: from the snapshot).")
@click.option("--no-cleanup", is_flag=True, help="Skip the init cleanup (TTL removal, retention).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@handle_errors
def restore(dest_dir: str, repo: str, log_url: str | None, storage_option: tuple[str, ...], ttl_mode: str | None,
            max_concurrency: int, work_dir: str | None, job: str, task: str, store: str | None,
            checkpoint_id: str | None, max_batch_id: int | None, store_type: str | None, no_cleanup: bool,
            as_json: bool, quiet: bool) -> None:
    """Restore a checkpoint into DEST_DIR, downloading only what is missing or different."""
    from blobstate import api

    key = _key(job, task, store, dest_dir)
    result = api.restore(
        dest_dir, repo=repo, log=log_url, job=key.job, task=key.task, store=key.store, store_type=store_type,
        checkpoint_id=checkpoint_id, max_batch_id=max_batch_id,
        storage_options=parse_storage_options(storage_option), ttl_mode=ttl_mode, max_concurrency=max_concurrency,
        work_dir=_work_dir(work_dir, repo, key), progress=_progress(quiet), cleanup=not no_cleanup,
    )
    text = (f"restored {key} checkpoint {result.checkpoint.checkpoint_id} (generation "
            f"{result.checkpoint.generation}): {result.files_downloaded} files downloaded "
            f"({result.bytes_downloaded} bytes), {result.files_kept} kept, {result.files_reused} reused, "
            f"{result.files_removed} removed, in {result.duration_ms:.0f} ms")
    if as_json:
        _emit(True, result.to_json(), "")
    else:
        _err(text) if not quiet else None
        click.echo(result.checkpoint.checkpoint_id)


@main.command("list")
@repo_options
@key_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@handle_errors
def list_cmd(repo: str, log_url: str | None, storage_option: tuple[str, ...], ttl_mode: str | None,
             max_concurrency: int, work_dir: str | None, job: str, task: str, store: str | None,
             as_json: bool) -> None:
    """List the retained checkpoints of a store (or, without --store, every store key in the repository)."""
    from blobstate.repository import Repository

    repository = Repository.open(repo, log=log_url, storage_options=parse_storage_options(storage_option))
    try:
        if store is None:
            from blobstate.collecting import discover_keys

            keys = discover_keys(repository)
        else:
            keys = [StoreKey(job, task, store)]
        rows = []
        for key in keys:
            for cp in repository.log.history(key):
                rows.append({"store": str(key), **cp.to_json()})
    finally:
        repository.close()
    if as_json:
        _emit(True, rows, "")
        return
    if not rows:
        _err("no checkpoints")
        return
    click.echo(f"{'store':30} {'gen':>5} {'checkpoint':28} {'batch':>6} {'index size':>10}")
    for r in rows:
        batch = "" if r["batchId"] is None else r["batchId"]
        click.echo(f"{r['store']:30} {r['generation']:>5} {r['checkpointId']:28} {batch!s:>6} "
                   f"{r['indexSizeInBytes']:>10}")


@main.command()
@repo_options
@key_options
@click.option("--checkpoint", "checkpoint_id", default=None, help="Checkpoint id (default: the latest).")
@click.option("--all", "all_checkpoints", is_flag=True, help="Verify every retained checkpoint.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@handle_errors
def verify(repo: str, log_url: str | None, storage_option: tuple[str, ...], ttl_mode: str | None,
           max_concurrency: int, work_dir: str | None, job: str, task: str, store: str | None,
           checkpoint_id: str | None, all_checkpoints: bool, as_json: bool) -> None:
    """Read every blob of a checkpoint and check sizes and CRC32C; exit 3 on any damage."""
    from blobstate import api
    from blobstate.verifying import raise_for_reports

    key = _key(job, task, store)
    reports = api.verify(repo=repo, key=key, log=log_url, checkpoint_id=checkpoint_id,
                         all_checkpoints=all_checkpoints, storage_options=parse_storage_options(storage_option),
                         max_concurrency=max_concurrency, raise_on_error=False)
    if as_json:
        _emit(True, [r.to_json() for r in reports], "")
    else:
        for r in reports:
            status = "ok" if r.ok else f"{len(r.problems)} problem(s)"
            click.echo(f"{key} {r.checkpoint.checkpoint_id}: {r.files} files, {r.bytes_read} bytes read: {status}")
            for f, m in r.problems:
                click.echo(f"  {f}: {m}")
    raise_for_reports(reports)


@main.command()
@repo_options
@click.option("--dry-run", is_flag=True, help="Show what would be deleted; delete nothing.")
@click.option("--ttl", "ttl_ms", type=click.IntRange(1), default=None,
              help="Orphans older than this (ms) are deleted (default: the blob TTL, 1 day).")
@click.option("--retain", type=click.IntRange(1), default=None,
              help="Checkpoints kept (default: the retention each store's writer recorded).")
@click.option("--install-lifecycle", is_flag=True,
              help="Install the cloud lifecycle rule for native TTL (or print it where the API does not allow it).")
@click.option("--now", "now_ms", type=int, default=None, hidden=True, help="Current time in ms (tests).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@handle_errors
def gc(repo: str, log_url: str | None, storage_option: tuple[str, ...], ttl_mode: str | None, max_concurrency: int,
       work_dir: str | None, dry_run: bool, ttl_ms: int | None, retain: int | None,
       install_lifecycle: bool, now_ms: int | None, as_json: bool) -> None:
    """Delete expired TTL blobs and orphans no retained snapshot references (only once older than the TTL)."""
    from blobstate import api
    from blobstate.repository import DEFAULT_TTL_MS

    options = parse_storage_options(storage_option)
    if install_lifecycle:
        from blobstate.backends import open_blob_store

        try:
            store = open_blob_store(repo, storage_options=options, ttl_mode="native")
        except ConfigurationError:
            store = None  # no native TTL here: leases only
        rule = store.lifecycle_rule(ttl_ms or DEFAULT_TTL_MS) if store is not None else None
        if rule is None:
            _err("this blob store has no lifecycle rule: TTL is kept as leases, swept by `blobstate gc`")
        elif dry_run or not store.install_lifecycle(ttl_ms or DEFAULT_TTL_MS):
            _err("install this lifecycle rule with your cloud's management API:")
            click.echo(rule)
        else:
            _err("lifecycle rule installed")
        return
    reports = api.gc(repo=repo, log=log_url, dry_run=dry_run, ttl_ms=ttl_ms or DEFAULT_TTL_MS,
                     retain=retain, now_ms=now_ms, storage_options=options, ttl_mode=ttl_mode,
                     work_base=work_dir)
    if as_json:
        _emit(True, [r.to_json() for r in reports], "")
        return
    verb = "would delete" if dry_run else "deleted"
    for r in reports:
        if r.skipped:
            click.echo(f"{r.key}: skipped: {r.skipped}")
            continue
        click.echo(f"{r.key}: {verb} {len(r.expired_deleted)} expired, {len(r.orphans_deleted)} orphans; "
                   f"{len(r.expired_healed)} expired but referenced (TTL removed)")
        for blob_id in r.expired_deleted + r.orphans_deleted:
            click.echo(f"  {blob_id}")


@main.command()
@repo_options
@key_options
@click.option("--journal", "journal_dir", default=None, type=click.Path(file_okay=False),
              help="The store's work directory holding journal.log (default: derived from repo and key).")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@handle_errors
def recover(repo: str, log_url: str | None, storage_option: tuple[str, ...], ttl_mode: str | None,
            max_concurrency: int, work_dir: str | None, job: str, task: str, store: str | None,
            journal_dir: str | None, dry_run: bool, as_json: bool) -> None:
    """Replay the journal: finish committed commits, abort uncommitted ones (the recovery replay tool)."""
    from blobstate import api

    key = _key(job, task, store)
    rows: list[dict[str, Any]] = []

    def report(action: Any, outcome: str) -> None:
        state = action.state
        row = {"commitId": state.commit_id, "state": state.phase.name, "action": action.name,
               "reason": action.reason, "blobs": len(state.blob_ids), "outcome": outcome}
        rows.append(row)
        if not as_json:
            click.echo(f"{state.commit_id}: {state.phase.name} -> {action.name} ({action.reason}); {outcome}")

    api.recover(repo=repo, key=key, log=log_url, work_dir=journal_dir or _work_dir(work_dir, repo, key),
                dry_run=dry_run, storage_options=parse_storage_options(storage_option), report=report)
    if as_json:
        _emit(True, rows, "")
    elif not rows:
        click.echo(f"{key}: nothing to recover")


@main.group()
def journal() -> None:
    """Inspect a store's commit journal."""


@journal.command("show")
@click.option("--repo", default=None, help="Repository URL (with the key options, to find the work directory).")
@key_options
@click.option("--work-dir", default=None, help="Work directory base.")
@click.option("--journal", "journal_dir", default=None, type=click.Path(file_okay=False),
              help="The store's work directory holding journal.log.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@handle_errors
def journal_show(repo: str | None, job: str, task: str, store: str | None, work_dir: str | None,
                 journal_dir: str | None, as_json: bool) -> None:
    """Print the journal's events (and a torn tail, if any)."""
    from blobstate.journal.events import event_to_dict
    from blobstate.journal.file import Journal
    from blobstate.journal.projection import project
    from blobstate.workdir import JOURNAL

    if journal_dir is None:
        if repo is None:
            raise click.UsageError("give --journal DIR, or --repo with the store key options")
        from blobstate.backends import normalize_url
        from blobstate.workdir import store_work_dir

        journal_dir = store_work_dir(normalize_url(repo), _key(job, task, store), work_dir)
    journal_file = Journal(os.path.join(journal_dir, JOURNAL))
    try:
        journal_file.read()
        corrupt = None
    except CorruptJournalError as exc:
        corrupt = exc
    result = journal_file.read(strict=False)
    for event in result.events:
        doc = event_to_dict(event)
        if as_json:
            click.echo(json.dumps(doc))
        else:
            rest = " ".join(f"{k}={v}" for k, v in doc.items() if k not in ("type", "v", "commit_id", "time_ms"))
            click.echo(f"{event.time_ms} {event.commit_id} {event.type_name} {rest}"[:300])
    for state in project(result.events).values():
        _err(f"commit {state.commit_id}: {state.phase.name}")
    if corrupt is not None:
        raise corrupt  # the events before the damage are printed above; exit code 3
    if result.torn is not None:
        _err(f"torn tail ignored: {result.torn.length} bytes at offset {result.torn.offset} ({result.torn.reason})")


def _attach_optional_commands() -> None:
    """Commands that live in their own modules (``blobstate plugins``, ``blobstate demo``)."""
    for module_name, attr in (("blobstate.cmd_plugins", "plugins_command"), ("blobstate.cmd_demo", "demo_command")):
        try:
            module = __import__(module_name, fromlist=[attr])
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        main.add_command(getattr(module, attr))


_attach_optional_commands()


def run() -> None:  # pragma: no cover - console script shim
    main(standalone_mode=True)


if __name__ == "__main__":  # pragma: no cover
    main()


__all__ = ["EXIT_USAGE", "main"]
