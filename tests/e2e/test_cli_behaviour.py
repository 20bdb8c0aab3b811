"""How the CLI behaves as a process: SIGTERM like SIGINT, a second interrupt that says what is left and how to
recover, a closed output pipe, `-v` on every subcommand with blobstate's own steps, environment variables in every
`--help`, shell completion, ids printed without terminal escapes, and no credential at any verbosity."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from fault_harness import start_cli, wait_stopped
from fixtures_core import blobstate_script, cli_env

from blobstate.cli import COMMANDS, main


def wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the command exited early: {proc.returncode} {proc.stderr.read()}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)  # polling for the plugin's marker file


def blob_files(repo: Path) -> list[Path]:
    return [p for p in repo.glob("*/*/*/blobs/*") if p.is_file()]


@pytest.fixture
def paused(tmp_path, work_base):
    """A store of six files, a pausefile:// repository, and the environment that holds a backup mid-upload."""
    store = tmp_path / "s"
    store.mkdir()
    for i in range(6):
        (store / f"f{i}").write_bytes(os.urandom(10_000))
    pause = tmp_path / "pause"
    pause.mkdir()
    env = cli_env(work_base, BLOBSTATE_PLUGINS="hold_store", BLOBSTATE_TEST_PAUSE_DIR=str(pause))
    return store, tmp_path / "repo", pause, env


def start_backup(store: Path, repo: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "blobstate.cli", "backup", str(store), "--repo",
                             f"pausefile://{repo}", "--max-concurrency", "1", "-q"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("signum, code, name", [(signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                                (signal.SIGINT, 130, "interrupted (SIGINT)")])
def test_sigterm_aborts_a_backup_like_sigint(paused, signum, code, name):
    store, repo, pause, env = paused
    proc = start_backup(store, repo, env)
    wait_for(pause / "uploading", proc)
    assert blob_files(repo)  # blobs were uploaded before the signal
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert name in stderr and "no commit of default/0/s is left open" in stderr
    assert "Traceback" not in stderr
    assert blob_files(repo) == []  # the abort deleted what the commit had uploaded


def test_a_second_interrupt_during_cleanup_says_what_is_left_and_how_to_recover(paused, cli):
    store, repo, pause, env = paused
    proc = start_backup(store, repo, {**env, "BLOBSTATE_TEST_PAUSE_DELETE": "1"})
    wait_for(pause / "uploading", proc)
    proc.send_signal(signal.SIGTERM)
    wait_for(pause / "deleting", proc)  # the abort's cleanup has started
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    left = len(blob_files(repo))
    assert left >= 2
    assert "again during cleanup" in stderr and "is left open" in stderr
    match = re.search(r"with (\d+) blob\(s\) in the repository", stderr)
    assert match and int(match.group(1)) >= left, stderr
    command = re.search(r"blobstate (recover --repo \S+ --job default --task 0 --store s)", stderr)
    assert command, stderr
    recovered = cli(*command.group(1).split(), env={"BLOBSTATE_PLUGINS": "hold_store"})
    assert recovered.returncode == 0, recovered.stderr
    assert blob_files(repo) == []
    again = cli("backup", store, "--repo", f"pausefile://{repo}", "-q", env={"BLOBSTATE_PLUGINS": "hold_store"})
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("step", ["CommitStarted", "LocalCheckpointCreated"])
def test_one_interrupt_before_any_upload_leaves_no_commit_open(tmp_path, work_base, step):
    """Issue 43 item 6: one Ctrl-C aborts the commit wherever it lands, before the first upload too (the local
    checkpoint being taken); only a second one during the abort's cleanup leaves it to `blobstate recover`."""
    store = tmp_path / "s"
    store.mkdir()
    for i in range(6):
        (store / f"f{i}").write_bytes(os.urandom(10_000))
    repo = tmp_path / "repo"
    proc = start_cli("backup", store, "--repo", repo, "-q", work_base=work_base,
                     env={"BLOBSTATE_PLUGINS": "pause_plugin", "BLOBSTATE_TEST_PAUSE_AT": step})
    wait_stopped(proc)  # stopped by its own SIGSTOP right after `step` is durable
    proc.send_signal(signal.SIGINT)  # pending until it runs again
    proc.send_signal(signal.SIGCONT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "no commit of default/0/s is left open" in stderr, stderr
    assert "blobstate recover" not in stderr and "Traceback" not in stderr
    assert blob_files(repo) == []
    checkpoints = [p for p in work_base.rglob("checkpoints/*") if p.is_dir()]
    assert checkpoints == []  # the half-taken local checkpoint went with the commit


@pytest.mark.parametrize("args", [("plugins",), ("journal", "show", "--repo", "REPO", "--store", "s"),
                                  ("list", "--repo", "REPO"), ("ls", "--repo", "REPO", "--store", "s")])
def test_a_closed_output_pipe_ends_quietly(tmp_path, work_base, cli, args):
    store = tmp_path / "s"
    store.mkdir()
    for i in range(40):
        (store / f"file-{i:03d}").write_bytes(b"x" * 100)
    repo = tmp_path / "repo"
    assert cli("backup", store, "--repo", repo, "-q").returncode == 0
    # An interrupted commit leaves events in the journal for `journal show` to print.
    cli("backup", store, "--repo", repo, "-q", env={"BLOBSTATE_PLUGINS": "kill_plugin",
                                                    "BLOBSTATE_TEST_KILL_AT": "BlobUploaded"})
    (store / "file-000").write_bytes(b"changed")
    cli("backup", store, "--repo", repo, "-q", env={"BLOBSTATE_PLUGINS": "kill_plugin",
                                                    "BLOBSTATE_TEST_KILL_AT": "CheckpointWritten"})
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` that has already exited
    proc = subprocess.run([sys.executable, "-m", "blobstate.cli", *[str(repo) if a == "REPO" else a for a in args]],
                          stdout=write_end, stderr=subprocess.PIPE, text=True, env=cli_env(work_base), timeout=120)
    os.close(write_end)
    assert proc.returncode == 141, proc.stderr
    for noise in ("BrokenPipe", "Exception", "error", "Traceback"):
        assert noise not in proc.stderr


def _commands():
    runner = CliRunner()
    for name in sorted(COMMANDS):
        command = main.get_command(None, name)  # type: ignore[arg-type]
        subs = getattr(command, "commands", None)
        if subs:
            for sub in sorted(subs):
                yield (name, sub), runner
        else:
            yield (name,), runner


@pytest.mark.parametrize("path", [p for p, _ in _commands()], ids=" ".join)
def test_every_subcommand_takes_v_and_shows_its_environment_variables(path):
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "-v, --verbose" in text
    assert "BLOBSTATE_STORAGE_OPTIONS" in text and "BLOBSTATE_WORK_DIR" in text
    command = main.get_command(None, path[0])  # type: ignore[arg-type]
    if len(path) > 1:
        command = command.commands[path[1]]
    for param in command.params:
        if getattr(param, "envvar", None):
            assert f"env var: {param.envvar}" in text, (path, param.name)
    if path[0] not in ("demo", "plugins"):
        assert "env var: BLOBSTATE_REPO" in text


def test_v_after_the_subcommand_shows_blobstates_steps(cli, tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    (store / "a").write_bytes(b"a" * 100)
    repo = tmp_path / "repo"
    backup = cli("backup", store, "--repo", repo, "-q", "-v")
    assert backup.returncode == 0, backup.stderr
    steps = [line for line in backup.stderr.splitlines() if "blobstate.steps" in line]
    names = [re.search(r": (\w+)", line.split("commit ", 1)[1]).group(1) for line in steps]
    assert names[:2] == ["CommitStarted", "LocalCheckpointCreated"] and "CheckpointWritten" in names
    assert names[-1] == "CommitCompleted"
    listed = cli("list", "--repo", repo, "-v")
    assert "INFO blobstate.api: opened repository" in listed.stderr
    quiet = cli("list", "--repo", repo)
    assert "INFO" not in quiet.stderr
    both = cli("-v", "restore", tmp_path / "out", "--repo", repo, "--store", "s", "-q", "-v")
    assert "DEBUG" in both.stderr or "INFO blobstate.api: restoring" in both.stderr


def test_shell_completion_works_as_documented(tmp_path):
    exe = str(blobstate_script())
    guide = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()  # the operators' guide
    assert '_BLOBSTATE_COMPLETE=bash_source blobstate' in guide
    script = subprocess.run([exe], env={**os.environ, "_BLOBSTATE_COMPLETE": "bash_source"}, capture_output=True,
                            text=True, timeout=60)
    assert script.returncode == 0 and "_blobstate_completion" in script.stdout
    words = subprocess.run([exe], env={**os.environ, "_BLOBSTATE_COMPLETE": "bash_complete",
                                       "COMP_WORDS": "blobstate di", "COMP_CWORD": "1"},
                           capture_output=True, text=True, timeout=60)
    assert "diff" in words.stdout.split() or "plain,diff" in words.stdout


def test_terminal_escape_sequences_in_ids_are_printed_safely(cli, tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    (store / "a").write_bytes(b"a")
    repo = tmp_path / "repo"
    assert cli("backup", store, "--repo", repo, "-q").returncode == 0
    record_dir = repo / "checkpoints" / "default" / "0" / "s"
    record = json.loads((record_dir / f"{1:020d}.json").read_text())
    hostile = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\u202e"
    record.update(generation=2, checkpointId=hostile, writerId="evil\x1b[5m:1:2")
    (record_dir / f"{2:020d}.json").write_text(json.dumps(record))
    for args in (("list",), ("verify", "--store", "s"), ("ls", "--store", "s"), ("stats",),
                 ("restore", tmp_path / "out", "--store", "s", "--checkpoint", "2")):
        result = cli(*args, "--repo", repo)
        output = result.stdout + result.stderr
        assert "\x1b" not in output and "\x07" not in output and "\u202e" not in output, (args, output)
    listed = cli("list", "--repo", repo)  # such an id is not one blobstate writes: the record is refused (issue 14)
    assert listed.returncode == 3 and "not a printable token" in listed.stderr, listed.stderr


def test_a_storage_option_without_equals_is_never_echoed(cli, tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYSECRETKEY"
    result = cli("backup", store, "--repo", tmp_path / "repo", "--storage-option", secret)
    assert result.returncode == 2
    assert "name=value" in result.stderr
    assert secret[:4] not in result.stderr and secret not in result.stdout


def test_no_credential_at_any_verbosity(cli, tmp_path, moto_server, s3_target):
    key_id, secret = "AKIAIOSFODNN7SECRETID", "wJalrXUtnFEMIsecretACCESSkey0123456789"
    token = "FwoGZXIvYXdzSESSIONtoken42"
    store = tmp_path / "s"
    store.mkdir()
    (store / "a").write_bytes(b"a" * 100)
    env = {"AWS_DEFAULT_REGION": "us-east-1", "BLOBSTATE_STORAGE_OPTIONS": json.dumps(
        {"endpoint_url": moto_server.endpoint})}
    options = ["--storage-option", f"key={key_id}", "--storage-option", f"secret={secret}",
               "--storage-option", f"token={token}"]
    env_creds = {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token}
    runs = [cli("-vv", "backup", store, "--repo", s3_target.url, *options, env=env),
            cli("list", "--repo", s3_target.url, "-vvv", *options, env=env),
            cli("list", "--repo", s3_target.url, "-vvv", env={**env, **env_creds}),
            cli("verify", "--repo", s3_target.url + "-missing", "-vvv", env={**env, **env_creds}),
            # native mode's tags go through s3fs and botocore (lease mode's commits never load them)
            cli("-vvv", "backup", store, "--repo", s3_target.url + "-native", "--ttl-mode", "native", *options,
                env=env)]
    assert runs[0].returncode == 0, runs[0].stderr[-3000:]
    assert runs[-1].returncode == 0, runs[-1].stderr[-3000:]
    assert "botocore" in runs[-1].stderr and "DEBUG" in runs[-1].stderr  # the SDK's debug log was on
    for run in runs:
        for value in (key_id, secret, token):
            assert value not in run.stderr and value not in run.stdout
