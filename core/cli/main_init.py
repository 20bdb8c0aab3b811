"""``blobstate init``: make a location a blobstate repository (optional: the first backup does it too), or move a
repository to another checkpoint log (``--change-log``)."""

from __future__ import annotations

import click

from blobstate.cli import common


@click.command()
@common.repository_options
@click.option("--change-log", is_flag=True,
              help="Move an existing repository to the checkpoint log --log (the checkpoints of the old log are not "
                   "carried over: back up each store again through the new one).")
@common.json_option
@common.handle_errors
def init(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...],
         change_log: bool, as_json: bool) -> None:
    """Write the repository marker into an empty location, recording its checkpoint log (--log; default: the file
    log inside the repository). Idempotent on a repository with that log; refuses a location that holds other
    objects (exit 6) and another log than the recorded one (exit 2) unless --change-log. Never required: the first
    backup into an empty location does the same."""
    from blobstate import api
    from blobstate.model.units import iso_time
    from blobstate.repository.log_identity import describe

    info = api.init(change_log=change_log, **common.repository(repo, log_url, storage_option, log_option))
    payload = {**info.to_json(), "createdTime": iso_time(info.created_time_ms), "repo": common.redact(repo)}
    log_text = f", checkpoint log: {describe(info.checkpoint_log)}" if info.checkpoint_log else ""
    common.emit(as_json, payload, f"blobstate repository {info.repository_id} at {common.redact(repo)} "
                f"(created {iso_time(info.created_time_ms) or 'before the marker existed'}{log_text})")
