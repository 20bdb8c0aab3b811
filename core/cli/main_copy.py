"""``blobstate copy --from R1 --to R2``: replicate checkpoints into another repository (another region or cloud),
uploading only what the target lacks, verified; resumable and idempotent."""

from __future__ import annotations

import os

import click

from blobstate.cli import command_settings, exits, naming, output, params
from blobstate.model.layout import DEFAULT_TTL_MS


def _side(flag: str, name: str, env: str, note: str = "") -> params.Decorator:
    """``--FLAG URL``, ``--FLAG-log URL``, ``--FLAG-option KEY=VALUE`` and ``--FLAG-key-file FILE`` of one side
    (``name``) of the copy; the variables of the first two ``env`` and ``env``-with-``LOG``."""
    return params.stack(
        click.option(f"--{flag}", name, required=True, envvar=env, help=f"The {name} repository's URL or path{note}."),
        click.option(f"--{flag}-log", f"{name}_log", default=None, envvar=env.replace("REPO", "LOG"),
                     help=f"The {name}'s checkpoint log URL (default: the file log inside it)."),
        click.option(f"--{flag}-option", f"{name}_option", multiple=True, metavar="KEY=VALUE",
                     help=f"fsspec storage option for the {name} (repeatable; default: BLOBSTATE_STORAGE_OPTIONS)."),
        click.option(f"--{flag}-key-file", f"{name}_key_file", default=None, metavar="FILE",
                     help=f"Key file of the {name} when it is encrypted (default: BLOBSTATE_KEY_FILE)."))


def _path(key_file: str | None) -> str | None:
    """A key file's absolute path (None: none given)."""
    return os.path.abspath(os.path.expanduser(key_file)) if key_file else None


@click.command(short_help="Copy checkpoints from one repository into another.")
@_side("from", "source", "BLOBSTATE_REPO")  # the repository the other commands work on is the one copied
@_side("to", "target", "BLOBSTATE_COPY_TO_REPO", " (made a repository when empty)")
@params.ttl_mode_option
@params.concurrency_option
@params.work_dir_option
@params.filter_options
@click.option("--checkpoint", default=None, envvar="BLOBSTATE_CHECKPOINT", metavar="CHECKPOINT",
              help="With --store: copy that store's checkpoints up to and including this one (an id, a unique "
                   "prefix, a generation); default: every checkpoint the target lacks.")
@click.option("--ttl", type=params.Duration(), default=DEFAULT_TTL_MS, show_default="1d", envvar="BLOBSTATE_TTL",
              help="How long copied blobs live unless their checkpoint lands at the target.")
@params.append_only_option
@params.limit_upload_option
@params.limit_download_option
@params.json_option
@exits.handle_errors
def copy(source: str, source_log: str | None, source_option: tuple[str, ...], source_key_file: str | None,
         target: str, target_log: str | None, target_option: tuple[str, ...], target_key_file: str | None,
         ttl_mode: str | None, max_concurrency: int, work_dir: str | None,
         job: str | None, task: str | None, store: str | None, checkpoint: str | None, ttl: int,
         append_only: bool | None, limit_upload: int | None, limit_download: int | None, as_json: bool) -> None:
    """Copy checkpoints from the repository --from into the repository --to: every store (or --job/--task/--store),
    in the source log's order, only those the target lacks; each object the target lacks is uploaded and checked
    against its CRC32C, and a record is appended at the target only once all it references is there. Checkpoint
    and batch ids stay the source's (a Spark query restarts from the copy). Run it again after an interruption: it
    finishes the job, and uploads nothing when nothing is new."""
    from blobstate import api
    from blobstate.config.units import format_size

    if checkpoint is not None and store is None:
        raise click.UsageError("--checkpoint needs --store")
    reports = api.copy(source=source, target=target, source_log=source_log, target_log=target_log, job=job,
                       task=task, store=store, checkpoint=checkpoint,
                       source_options=naming.storage_options(source_option) or None,
                       target_options=naming.storage_options(target_option) or None, ttl=ttl, ttl_mode=ttl_mode,
                       max_concurrency=max_concurrency, work_base=work_dir, append_only=append_only,
                       limit_upload=limit_upload, limit_download=limit_download,
                       source_key_file=_path(source_key_file), target_key_file=_path(target_key_file),
                       settings=command_settings.settings())
    lines = [f"{r.key}: copied {len(r.copied)} checkpoint(s) ({r.blobs_uploaded} blobs, "
             f"{format_size(r.bytes_uploaded)} uploaded; {r.blobs_present} already there), {len(r.present)} held "
             f"already, {len(r.skipped)} skipped" for r in reports]
    output.emit(as_json, [r.to_json() for r in reports], "\n".join(lines) or "no stores")
