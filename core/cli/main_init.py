"""``blobstate init``: make a location a blobstate repository (optional: the first backup does it too)."""

from __future__ import annotations

import click

from blobstate.cli import common


@click.command()
@click.option("--repo", required=True, envvar="BLOBSTATE_REPO",
              help="Repository URL or path (file://, s3://, gs://, az://, ...).")
@click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
              help="fsspec storage option for the repository (repeatable).")
@common.json_option
@common.handle_errors
def init(repo: str, storage_option: tuple[str, ...], as_json: bool) -> None:
    """Write the repository marker into an empty location (idempotent on a repository; refuses a location that
    holds other objects, exit 6). Never required: the first backup into an empty location does the same."""
    from blobstate import api
    from blobstate.model.units import iso_time

    info = api.init(repo=repo, storage_options=common.storage_options(storage_option))
    payload = {**info.to_json(), "createdTime": iso_time(info.created_time_ms), "repo": common.redact(repo)}
    common.emit(as_json, payload, f"blobstate repository {info.repository_id} at {common.redact(repo)} "
                f"(created {iso_time(info.created_time_ms) or 'before the marker existed'})")
