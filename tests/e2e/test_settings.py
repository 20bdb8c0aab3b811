"""One settings object, built once by the CLI and by each API verb and handed down: sizes in human units, malformed
values refused with a typed error naming the variable, a call's keywords reaching only what that call opens (no
thread-local or process-wide "current" settings), and the environment read in one place
(``blobstate.config.settings``; its unit tests: ``tests/unit/config/test_settings.py``)."""

from __future__ import annotations

import pytest

from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError


def test_the_transfer_budget_takes_human_units():
    from blobstate.plugins.toolkit.transfer import budget_from

    settings = Settings.from_environ({"BLOBSTATE_TRANSFER_BUDGET": "96MiB"})
    assert budget_from({}, settings.transfer_budget) == 96 << 20
    assert budget_from({"transfer_budget": "2GiB"}, settings.transfer_budget) == 2 << 30
    with pytest.raises(ConfigurationError, match="BLOBSTATE_TRANSFER_BUDGET"):
        Settings.from_environ({"BLOBSTATE_TRANSFER_BUDGET": "12 parsecs"})


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


@pytest.fixture
def store(tmp_path):
    src = tmp_path / "counts"
    src.mkdir()
    (src / "a").write_bytes(b"a" * 100)
    return src


def test_a_verbs_keywords_reach_what_it_opens_and_nothing_else(tmp_path, store, monkeypatch):
    """The keywords of ``backup`` are in the settings its repository and committer run with; the environment is the
    default; nothing stays behind for the next call (no process-wide or thread-local settings)."""
    from blobstate import api
    from blobstate.commit.backup import StoreCommitter

    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "from-env"))
    seen = []
    backup = StoreCommitter.backup

    def spying(self, *args, **kwargs):
        seen.append((self.settings, self.repo.settings, self.work_dir))
        return backup(self, *args, **kwargs)

    monkeypatch.setattr(StoreCommitter, "backup", spying)
    api.backup(str(store), repo=str(tmp_path / "repo"), retain=2, work_base=str(tmp_path / "from-api"),
               append_only=True, limit_upload="10MiB")
    api.backup(str(store), repo=str(tmp_path / "repo"))
    (first, opened_with, work_dir), (second, _, later_dir) = seen
    assert first is opened_with and (first.work_dir, first.append_only, first.limit_upload) == (
        str(tmp_path / "from-api"), True, 10 << 20)
    assert work_dir.startswith(str(tmp_path / "from-api"))
    assert (second.work_dir, second.append_only, second.limit_upload) == (str(tmp_path / "from-env"), False, None)
    assert later_dir.startswith(str(tmp_path / "from-env"))


def test_two_calls_at_once_each_run_with_their_own_settings(tmp_path, store, monkeypatch):
    """Two threads back up at once with other limits, each held at its commit until the other is there too: each
    call's blob store has its own (they were a thread-local override of one process-wide object before)."""
    import threading

    from blobstate import api
    from blobstate.commit.backup import StoreCommitter

    seen: dict[str, object] = {}
    both = threading.Barrier(2)
    backup = StoreCommitter.backup

    def holding(self, *args, **kwargs):
        both.wait(30)  # both calls are open at once
        fsspec_store = self.repo.codec.inner.inner  # the codec, the retrying wrapper, then the plugin's store
        seen[self.repo.url.rsplit("/", 1)[-1]] = (self.settings.limit_upload, fsspec_store.limits.upload.rate)
        return backup(self, *args, **kwargs)

    monkeypatch.setattr(StoreCommitter, "backup", holding)

    def call(name: str, rate: str) -> None:
        api.backup(str(store), repo=f"file://{tmp_path}/{name}", limit_upload=rate, work_base=str(tmp_path / name))

    threads = [threading.Thread(target=call, args=args) for args in (("a", "1MiB"), ("b", "3MiB"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert seen == {"a": (1 << 20, 1 << 20), "b": (3 << 20, 3 << 20)}


def test_plugins_get_the_settings_of_the_call_that_builds_the_manager(tmp_path, store, monkeypatch):
    from blobstate import api
    from blobstate.plugin import manager

    delivered = []
    configure = manager.BlobstatePluginManager.configure

    def recording(self, config):
        delivered.append((config, self.settings))
        return configure(self, config)

    monkeypatch.setattr(manager.BlobstatePluginManager, "configure", recording)
    manager.reset_plugin_manager()
    try:
        api.backup(str(store), repo=str(tmp_path / "repo"), work_base=str(tmp_path / "w"), append_only=True,
                   storage_options={"secret": "hunter2", "anon": True})
    finally:
        manager.reset_plugin_manager()
    [(config, handed)] = delivered
    assert (config["work_base"], config["append_only"], handed.work_dir) == (str(tmp_path / "w"), True,
                                                                            str(tmp_path / "w"))
    assert "hunter2" not in repr(config)
