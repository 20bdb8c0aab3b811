"""The plugin manager uses pluggy as its authors meant it: a ``PluginManager`` subclass, hooks called through
``pm.hook`` (so pluggy's call monitoring sees them: ``BLOBSTATE_TRACE_PLUGINS``), configuration delivered with
``call_historic``, plugins blocked by name (``BLOBSTATE_DISABLE_PLUGINS``), one registration table for the
built-ins, entry points read once per process (from a cache while nothing installed changed)."""

from __future__ import annotations

import warnings

import pluggy
import pytest

from blobstate import hookimpl
from blobstate.errors import ConfigurationError
from blobstate.plugin import manager as manager_module
from blobstate.plugin.manager import build_plugin_manager, reset_plugin_manager
from blobstate.plugin.records import BlobStoreSpec, LocalStoreSpec
from blobstate.plugins.registry import KNOWN_IMPLEMENTATIONS


class Recorder:
    """An observer and configuration recorder."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.configured: list[tuple[dict, object]] = []

    @hookimpl
    def blobstate_journal_event(self, event, store_key):
        self.events.append(event.type_name)

    @hookimpl
    def blobstate_configure(self, config, settings):
        self.configured.append((config, settings))


def test_the_manager_is_a_pluggy_plugin_manager_built_from_the_one_table():
    mgr = build_plugin_manager(autoload=False)
    assert isinstance(mgr, pluggy.PluginManager)
    names = {name for name, _ in mgr.list_name_plugin()}
    assert set(KNOWN_IMPLEMENTATIONS) | {"steplog"} <= names
    assert {r.spec.name for r in mgr.registered_specs()} == {
        spec.name for records in KNOWN_IMPLEMENTATIONS.values() for spec in records}


def test_a_blocked_builtin_backend_is_gone(monkeypatch):
    assert build_plugin_manager(autoload=False).select(BlobStoreSpec, "s3").spec.name == "s3"
    monkeypatch.setenv("BLOBSTATE_DISABLE_PLUGINS", "s3, dir_store")
    mgr = build_plugin_manager(autoload=False)
    assert not mgr.has_plugin("s3") and mgr.is_blocked("s3")
    assert mgr.select(BlobStoreSpec, "s3").spec.name == "fsspec-generic"  # only the generic fallback is left
    with pytest.raises(ConfigurationError, match="no local store for 'dir'"):
        mgr.select(LocalStoreSpec, "dir")
    assert "s3" not in {i.name for i in mgr.plugin_infos()}


def test_a_blocked_observer_is_not_called(monkeypatch, tmp_path, work_base):
    from blobstate import api

    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a" * 100)
    seen = Recorder()
    reset_plugin_manager(build_plugin_manager(autoload=False))
    manager_module.get_plugin_manager().register(seen, "recorder")
    api.backup(str(src), repo=str(tmp_path / "repo"), store_type="dir")
    assert "CheckpointWritten" in seen.events  # the control: registered, it sees the commit

    monkeypatch.setenv("BLOBSTATE_DISABLE_PLUGINS", "recorder")
    blocked = Recorder()
    mgr = build_plugin_manager(autoload=False)
    reset_plugin_manager(mgr)
    assert mgr.register(blocked, "recorder") is None
    (src / "a").write_bytes(b"b" * 100)
    api.backup(str(src), repo=str(tmp_path / "repo"), store_type="dir")
    assert blocked.events == [] and blocked.configured == []


def test_a_blocked_steplog_logs_no_steps(cli, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a")
    shown = cli("-v", "backup", src, "--repo", tmp_path / "repo", "--store-type", "dir")
    assert shown.returncode == 0, shown.stderr
    assert "CheckpointWritten" in shown.stderr
    hidden = cli("-v", "backup", src, "--repo", tmp_path / "repo", "--store-type", "dir",
                 env={"BLOBSTATE_DISABLE_PLUGINS": "steplog"})
    assert hidden.returncode == 0, hidden.stderr
    assert "CheckpointWritten" not in hidden.stderr


def test_configuration_is_historic_and_carries_the_settings(monkeypatch):
    monkeypatch.setenv("BLOBSTATE_TRANSFER_BUDGET", "96MiB")
    mgr = build_plugin_manager(autoload=False)
    late = Recorder()
    mgr.register(late, "late")  # registered after the configuration was delivered: gets it at registration
    [(config, settings)] = late.configured
    assert config["BLOBSTATE_TRANSFER_BUDGET"] == "96MiB"
    assert settings.transfer_budget == 96 << 20 and settings is mgr.settings


def test_a_plugin_whose_configure_raises_is_dropped_alone():
    class Raises:
        @hookimpl
        def blobstate_configure(self, config):
            raise RuntimeError("boom")

        @hookimpl
        def blobstate_blob_stores(self):
            return [BlobStoreSpec(name="never", schemes=("never",), factory="x:y")]

    mgr = build_plugin_manager(autoload=False)
    with pytest.warns(UserWarning, match="boom"):
        assert mgr.register(Raises(), "raises") is None
    assert not mgr.has_plugin("raises")
    assert [b.name for b in mgr.broken] == ["raises"] and "RuntimeError: boom" in mgr.broken[0].error
    assert "never" not in {r.spec.name for r in mgr.registered_specs()}


def test_a_backend_hook_that_raises_drops_only_its_plugin():
    class Bad:
        @hookimpl
        def blobstate_blob_stores(self):
            raise RuntimeError("no records")

    mgr = build_plugin_manager(autoload=False)
    mgr.register(Bad(), "bad")
    with pytest.warns(UserWarning, match="no records"):
        specs = mgr.registered_specs()
    assert "s3" in {r.spec.name for r in specs} and "bad" in {b.name for b in mgr.broken}


def test_tracing_shows_every_hook_call(cli, tmp_path):
    quiet = cli("plugins")
    assert quiet.returncode == 0 and "plugin trace" not in quiet.stderr
    traced = cli("plugins", env={"BLOBSTATE_TRACE_PLUGINS": "1"})
    assert traced.returncode == 0, traced.stderr
    for hook in ("blobstate_configure", "blobstate_blob_stores", "blobstate_checkpoint_logs",
                 "blobstate_local_stores"):
        assert f"plugin trace: {hook}(" in traced.stderr, traced.stderr
    assert "plugin trace: blobstate_blob_stores returned 1 result(s)" in traced.stderr


def test_entry_points_are_read_once_per_process_and_from_the_cache_while_nothing_installed_changed(
        monkeypatch, tmp_path):
    from importlib import metadata

    from dists import make_dist

    from blobstate.plugin import entry_points as installed

    monkeypatch.setenv("BLOBSTATE_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    make_dist(site, "bs-one", "1.0", "bs_one_plugin", "")
    monkeypatch.syspath_prepend(str(site))
    calls = []
    real = metadata.entry_points
    monkeypatch.setattr(metadata, "entry_points", lambda **kw: calls.append(kw) or real(**kw))

    def names():
        installed.entry_points.cache_clear()
        return sorted(ep.name for ep in installed.entry_points(str(tmp_path / "cache")))  # a process's settings

    installed.entry_points.cache_clear()
    for _ in range(3):
        build_plugin_manager(autoload=True)
    assert calls == [{"group": "blobstate"}]  # once per process
    assert "bs_one_plugin" in names() and len(calls) == 1  # a new process: from the cache, no scan
    make_dist(site, "bs-two", "1.0", "bs_two_plugin", "")  # installed since
    assert {"bs_one_plugin", "bs_two_plugin"} <= set(names()) and len(calls) == 2
    ep_file = site / "bs_one-1.0.dist-info" / "entry_points.txt"
    ep_file.write_text("[blobstate]\nbs_one_renamed = bs_one_plugin\n")  # edited in place
    found = names()
    assert "bs_one_renamed" in found and "bs_one_plugin" not in found and len(calls) == 3
    (tmp_path / "cache" / installed.CACHE_NAME).write_text("{not json")  # a damaged cache only costs a scan
    assert "bs_one_renamed" in names() and len(calls) == 4
    monkeypatch.setenv("BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD", "1")
    reset_plugin_manager()
    build_plugin_manager()
    assert len(calls) == 4  # autoload off: neither the cache nor the scan


def test_disabling_a_backend_name_warns_naming_its_plugin(monkeypatch):
    """``sql`` is a checkpoint log's name; its plugin is ``sql_log``: blocking ``sql`` blocks nothing, and says so,
    naming the plugin to block instead. A plugin's own name blocks it without a warning."""
    monkeypatch.setenv("BLOBSTATE_DISABLE_PLUGINS", "sql")
    with pytest.warns(UserWarning, match=r"'sql' is no plugin.*backend of plugin 'sql_log'.*"
                                         r"BLOBSTATE_DISABLE_PLUGINS=sql_log") as caught:
        mgr = build_plugin_manager(autoload=False)
    assert len(caught) == 1
    assert mgr.has_plugin("sql_log")  # nothing was blocked by the backend's name
    monkeypatch.setenv("BLOBSTATE_DISABLE_PLUGINS", "sql_log")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mgr = build_plugin_manager(autoload=False)
    assert not mgr.has_plugin("sql_log")
