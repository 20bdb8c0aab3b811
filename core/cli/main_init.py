"""``blobstate init``: make a location a blobstate repository (optional: the first backup does it too), encrypted
with ``--encrypt --key-file FILE``, or move a repository to another checkpoint log (``--change-log``)."""

from __future__ import annotations

import click

from blobstate.cli import exits, naming, output, params


@click.command(short_help="Create a repository in an empty location.")
@params.repository_options
@click.option("--change-log", is_flag=True,
              help="Move an existing repository to the checkpoint log --log (the checkpoints of the old log are not "
                   "carried over: back up each store again through the new one).")
@click.option("--encrypt", is_flag=True,
              help="Create the repository encrypted (AES-256-GCM, a data key wrapped by --key-file or a key provider "
                   "plugin); without a key this is an error (exit 3). A key alone does the same.")
@click.option("--key-provider", default=None, envvar="BLOBSTATE_KEY_PROVIDER", metavar="NAME",
              help="Key provider that wraps the data key (default: file, with --key-file; a KMS plugin's name).")
@click.option("--key-id", default=None, metavar="ID", help="The key provider's key (a KMS key id or ARN).")
@params.json_option
@exits.handle_errors
def init(repo: str, log_url: str | None, storage_option: tuple[str, ...], log_option: tuple[str, ...],
         change_log: bool, encrypt: bool, key_provider: str | None, key_id: str | None, as_json: bool) -> None:
    """Write the repository marker into an empty location, recording its checkpoint log (--log; default: the file
    log inside the repository) and, with a key (--encrypt --key-file FILE), the data key wrapped by it. Idempotent
    on a repository with that log; refuses a location that holds other objects (exit 6), another log than the
    recorded one (exit 2) unless --change-log, and a wrong or missing key (exit 3). Never required: the first backup
    into an empty location does the same (encrypted when a key is configured)."""
    from blobstate import api
    from blobstate.config.units import iso_time
    from blobstate.repository.log_identity import describe

    info = api.init(change_log=change_log, encrypt=encrypt, key_provider=key_provider, key_id=key_id,
                    **naming.repository(repo, log_url, storage_option, log_option))
    payload = {**info.to_json(), "createdTime": iso_time(info.created_time_ms), "repo": output.redact(repo)}
    log_text = f", checkpoint log: {describe(info.checkpoint_log)}" if info.checkpoint_log else ""
    if info.encryption is not None:
        payload["encryption"] = {k: v for k, v in info.encryption.items() if k != "wrappedKey"}
        log_text += f", encrypted ({info.encryption.get('algorithm')}, key {info.encryption.get('keyId')})"
    output.emit(as_json, payload, f"blobstate repository {info.repository_id} at {output.redact(repo)} "
                f"(created {iso_time(info.created_time_ms) or 'before the marker existed'}{log_text})")
