"""``blobstate.cli.naming``: the repository options as the API's keywords (their secret values hidden from every
message), and the store key the options name (``--store`` defaulting to the directory's name)."""

from __future__ import annotations

import click
import pytest

from blobstate.cli import naming, output
from blobstate.model.records import StoreKey


@pytest.fixture(autouse=True)
def no_secrets_yet(monkeypatch):
    """The secrets of this command line start empty (a CLI process runs one command)."""
    monkeypatch.setattr(output, "_SECRETS", [])


def test_storage_options_remember_their_secret_values_and_log_options_may_be_none():
    parsed = naming.storage_options(("client_kwargs.token=tok-123", "region=eu"))
    assert parsed == {"client_kwargs": {"token": "tok-123"}, "region": "eu"}
    assert output._SECRETS == ["tok-123"]
    assert naming.log_options(()) is None and naming.log_options(("table=t",)) == {"table": "t"}
    options = naming.repository("file:///r", None, ("a=1",), ())
    assert options.pop("settings") is not None
    assert options == {"repo": "file:///r", "log": None, "storage_options": {"a": 1}, "log_options": None}


def test_the_store_key_defaults_its_store_to_the_directorys_name(tmp_path):
    assert naming.store_key("j", "t", "s") == StoreKey("j", "t", "s")
    assert naming.store_key("j", "t", None, str(tmp_path / "mystore")) == StoreKey("j", "t", "mystore")
    assert naming.store_key("j", "t", "named", str(tmp_path / "dir")) == StoreKey("j", "t", "named")
    with pytest.raises(click.UsageError, match="--store is required here"):
        naming.store_key("j", "t", None)
    with pytest.raises(click.UsageError, match="--store is required here"):
        naming.require_store(None)
    assert naming.require_store("s") == "s"
