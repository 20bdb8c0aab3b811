"""``blobstate.cli.command_settings``: a command's settings built once from the environment and its options, and
``--key-file`` lasting exactly the command, never set in the environment."""

from __future__ import annotations

import os

import click
from click.testing import CliRunner

from blobstate.cli import command_settings, naming, params


def run(command: click.Command, *args: str, **env: str):
    return CliRunner().invoke(command, list(args), env=env or None, catch_exceptions=False)


def test_a_key_file_is_the_commands_setting_and_never_an_environment_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("BLOBSTATE_KEY_FILE", raising=False)
    seen = []

    @click.command()
    @params.key_file_option
    def command():
        seen.append((command_settings.settings().key_file, os.environ.get("BLOBSTATE_KEY_FILE")))

    run(command, "--key-file", "~/k.key", HOME=str(tmp_path))
    assert seen == [(str(tmp_path / "k.key"), None)]
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", "/before.key")
    run(command, "--key-file", "/other.key")
    run(command)
    assert seen[1:] == [("/other.key", "/before.key"), ("/before.key", "/before.key")]


def test_a_commands_settings_are_built_once_from_the_environment_and_its_options(monkeypatch, tmp_path):
    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "env"))
    seen = []

    @click.command()
    @click.option("--work-dir", default=None)
    @click.option("--retain", type=int, default=None)
    def command(work_dir, retain):
        command_settings.record_command("backup", {"work_dir": work_dir, "retain": retain})
        seen.append((command_settings.settings(), command_settings.settings()))

    run(command, "--retain", "3")
    run(command, "--work-dir", str(tmp_path / "cli"))
    (first, again), (second, _) = seen
    assert first is again and first.command == "backup" and first.options["retain"] == 3
    assert first.work_dir == str(tmp_path / "env") and second.work_dir == str(tmp_path / "cli")
    outside = naming.repository("file:///r", None, (), ())["settings"]
    assert outside.command is None  # outside a command: the environment's
