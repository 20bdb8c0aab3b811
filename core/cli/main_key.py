"""``blobstate key rotate``: re-wrap an encrypted repository's data key with a new key (only the marker changes)."""

from __future__ import annotations

import click

from blobstate.cli import command_settings, exits, naming, output, params


@click.group(short_help="The key of an encrypted repository.")
def key() -> None:
    """The key of an encrypted repository."""


@key.command(short_help="Wrap the data key with a new key (only the marker changes).")
@click.option("--repo", required=True, envvar="BLOBSTATE_REPO", help="Repository URL or path.")
@click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
              help="fsspec storage option for the repository (repeatable; also BLOBSTATE_STORAGE_OPTIONS as JSON).")
@params.key_file_option
@click.option("--new-key-file", default=None, metavar="FILE", help="The key file that wraps the data key from now on.")
@click.option("--new-key-provider", default=None, metavar="NAME",
              help="The key provider that wraps it from now on (default: the current one; a KMS plugin's name).")
@click.option("--new-key-id", default=None, metavar="ID", help="The new key provider's key (a KMS key id or ARN).")
@params.json_option
@exits.handle_errors
def rotate(repo: str, storage_option: tuple[str, ...], new_key_file: str | None, new_key_provider: str | None,
           new_key_id: str | None, as_json: bool) -> None:
    """Unwrap the repository's data key with the current key (--key-file, BLOBSTATE_KEY_FILE) and wrap it with the
    new one, rewriting only the repository marker: no data is read or rewritten, and the old key no longer opens the
    repository. The data key itself stays the same (copy the state into a new repository to change it). A wrong
    current key is refused (exit 3) and nothing changes."""
    import os

    from blobstate import api

    info = api.rotate_key(repo=repo, storage_options=naming.storage_options(storage_option),
                          new_key_file=os.path.abspath(new_key_file) if new_key_file else None,
                          new_key_provider=new_key_provider, new_key_id=new_key_id,
                          settings=command_settings.settings())
    encryption = {k: v for k, v in (info.encryption or {}).items() if k != "wrappedKey"}
    output.emit(as_json, {"repo": output.redact(repo), "repositoryId": info.repository_id, "encryption": encryption},
                f"{output.redact(repo)}: the data key is now wrapped by key {encryption.get('keyId')} "
                f"(provider {encryption.get('keyProvider')})")
