"""One settings object: read once from the environment (and the CLI's options), sizes and durations in human
units, booleans parsed one way, malformed values refused with a typed error naming the variable."""

from __future__ import annotations

import pytest

from blobstate.config import settings as settings_module
from blobstate.config.settings import Settings, parse_bool
from blobstate.errors import ConfigurationError


def test_the_transfer_budget_takes_human_units(monkeypatch):
    from blobstate.plugins.toolkit.transfer import budget_from

    monkeypatch.setenv("BLOBSTATE_TRANSFER_BUDGET", "96MiB")
    assert budget_from({}) == 96 << 20
    assert budget_from({"transfer_budget": "2GiB"}) == 2 << 30
    monkeypatch.setenv("BLOBSTATE_TRANSFER_BUDGET", "12 parsecs")
    with pytest.raises(ConfigurationError, match="BLOBSTATE_TRANSFER_BUDGET"):
        budget_from({})


def test_a_backup_runs_with_a_budget_in_human_units(cli, tmp_path):
    """bench/README.md writes ``BLOBSTATE_TRANSFER_BUDGET=96MiB``: it was refused (exit 2) by an ``int()``."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a" * 1000)
    result = cli("backup", src, "--repo", tmp_path / "repo", "--store-type", "dir",
                 env={"BLOBSTATE_TRANSFER_BUDGET": "96MiB"})
    assert result.returncode == 0, result.stderr
    bad = cli("backup", src, "--repo", tmp_path / "repo", "--store-type", "dir",
              env={"BLOBSTATE_TRANSFER_BUDGET": "lots"})
    assert bad.returncode == 2 and "BLOBSTATE_TRANSFER_BUDGET" in bad.stderr


def test_every_variable_is_read_into_one_object():
    s = Settings.from_environ({
        "BLOBSTATE_WORK_DIR": "/w", "BLOBSTATE_RETRY_ATTEMPTS": "3", "BLOBSTATE_TRANSFER_BUDGET": "64MB",
        "BLOBSTATE_FILE_FSYNC": "off", "BLOBSTATE_APPEND_RESOLVE_S": "1500ms", "BLOBSTATE_PLUGINS": "a, b",
        "BLOBSTATE_DISABLE_PLUGINS": "s3", "BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD": "yes",
        "BLOBSTATE_TRACE_PLUGINS": "TRUE", "BLOBSTATE_DEBUG": "1", "HOME": "/not/a/setting"})
    assert (s.work_dir, s.retry_attempts, s.transfer_budget, s.file_fsync, s.append_resolve_s) == (
        "/w", 3, 64_000_000, False, 1.5)
    assert (s.plugins, s.disabled_plugins, s.plugins_autoload, s.trace_plugins, s.debug) == (
        ("a", "b"), ("s3",), False, True, True)
    assert "HOME" not in s.environ
    assert Settings.from_environ({"BLOBSTATE_APPEND_RESOLVE_S": "2.5"}).append_resolve_s == 2.5


@pytest.mark.parametrize("variable, value", [("BLOBSTATE_FILE_FSYNC", "maybe"), ("BLOBSTATE_RETRY_ATTEMPTS", "x"),
                                             ("BLOBSTATE_TRANSFER_BUDGET", "100KiB"),
                                             ("BLOBSTATE_APPEND_RESOLVE_S", "soon")])
def test_a_malformed_variable_is_refused_by_name(variable, value):
    with pytest.raises(ConfigurationError, match=variable) as info:
        Settings.from_environ({variable: value})
    assert info.value.exit_code == 2


def test_booleans_are_parsed_one_way():
    assert [parse_bool("X", v, False) for v in ("1", "true", "Yes", "on")] == [True] * 4
    assert [parse_bool("X", v, True) for v in ("0", "false", "NO", "off")] == [False] * 4
    assert parse_bool("X", "", True) is True and parse_bool("X", None, False) is False


def test_read_once_rebuilt_only_when_a_variable_changes(monkeypatch):
    settings_module.reset()
    monkeypatch.setenv("BLOBSTATE_RETRY_ATTEMPTS", "4")
    first = settings_module.current()
    assert settings_module.current() is first and first.retry_attempts == 4
    monkeypatch.setenv("BLOBSTATE_RETRY_ATTEMPTS", "6")
    assert settings_module.current().retry_attempts == 6


def test_the_cli_options_and_api_keywords_join_the_settings(monkeypatch):
    settings_module.reset()
    monkeypatch.setenv("BLOBSTATE_WORK_DIR", "/from/env")
    settings_module.set_configuration("backup", {"log_url": "sqlite:///x.db", "work_dir": "/from/cli"})
    try:
        s = settings_module.current()
        assert (s.command, s.options["log"], s.work_dir) == ("backup", "sqlite:///x.db", "/from/cli")
        assert s.with_options(retain=3).options["retain"] == 3
    finally:
        settings_module.reset()
