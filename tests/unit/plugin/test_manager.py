"""``blobstate.plugin.manager``: backends selected by scheme (highest priority, a tie or a name given twice is a
``PluginError``, ``BLOBSTATE_BACKEND_<SCHEME>`` overrides, nothing serving is a ``ConfigurationError``), plugins
blocked by name, a plugin whose configure hook raises or that implements an unknown hook dropped as broken alone,
observers that raise never breaking the caller, and ``load_reference``."""

from __future__ import annotations

import logging
import os.path

import pytest

from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError, PluginError
from blobstate.plugin.hookspecs import hookimpl
from blobstate.plugin.manager import BlobstatePluginManager, build_plugin_manager, load_reference, spec_keys
from blobstate.plugin.records import BlobStoreSpec, CheckpointLogSpec, KeyProviderSpec, LocalStoreSpec


class _Stores:
    """A plugin giving blob stores."""

    def __init__(self, *specs: BlobStoreSpec) -> None:
        self.specs = specs

    @hookimpl
    def blobstate_blob_stores(self):  # noqa: ANN201
        return list(self.specs)


def _spec(name: str, *schemes: str, priority: int = 0) -> BlobStoreSpec:
    return BlobStoreSpec(name=name, schemes=schemes, factory="nowhere:Store", priority=priority)


def _manager(*plugins: object, **settings: object) -> BlobstatePluginManager:
    mgr = BlobstatePluginManager(Settings(**settings))  # type: ignore[arg-type]
    for n, plugin in enumerate(plugins):
        mgr.register(plugin, f"p{n}", distribution=f"dist{n}")
    return mgr


def test_the_highest_priority_serves_a_scheme_and_a_catch_all_serves_any():
    mgr = _manager(_Stores(_spec("low", "my", priority=1)), _Stores(_spec("high", "my", priority=5)),
                   _Stores(_spec("any", "*", priority=-1)))
    assert mgr.select(BlobStoreSpec, "my").spec.name == "high"
    assert mgr.select(BlobStoreSpec, "other").spec.name == "any"
    assert mgr.select(BlobStoreSpec, "my").plugin == "p1"


def test_equal_priorities_are_ambiguous_naming_both_and_the_variable_that_chooses():
    mgr = _manager(_Stores(_spec("a", "my")), _Stores(_spec("b", "my")))
    with pytest.raises(PluginError, match=r"'a' from dist0 and 'b' from dist1 .*BLOBSTATE_BACKEND_MY=<name>"):
        mgr.select(BlobStoreSpec, "my")
    chosen = Settings(environ={"BLOBSTATE_BACKEND_MY": "b"})
    assert mgr.select(BlobStoreSpec, "my", chosen).spec.name == "b"
    with pytest.raises(ConfigurationError, match="BLOBSTATE_BACKEND_MY=c: no backend of that name"):
        mgr.select(BlobStoreSpec, "my", Settings(environ={"BLOBSTATE_BACKEND_MY": "c"}))
    chosen_map, problems = mgr.selection()
    assert (BlobStoreSpec, "my") not in chosen_map and any("ambiguous" in p for p in problems)


def test_one_backend_name_from_two_plugins_fails_only_its_own_selection():
    mgr = _manager(_Stores(_spec("same", "my", priority=1)), _Stores(_spec("same", "my", priority=2)),
                   _Stores(_spec("fine", "ok")))
    with pytest.raises(PluginError, match="provided twice: by plugin 'p0'"):
        mgr.select(BlobStoreSpec, "my")
    assert mgr.select(BlobStoreSpec, "ok").spec.name == "fine"


def test_a_scheme_nobody_serves_is_a_configuration_error_listing_the_known_ones():
    mgr = _manager(_Stores(_spec("a", "s3", "s3a")))
    with pytest.raises(ConfigurationError, match="no blob store for 'gs'; known: s3, s3a"):
        mgr.select(BlobStoreSpec, "gs")
    with pytest.raises(ConfigurationError, match="no checkpoint log for 's3'; known: none"):
        mgr.select(CheckpointLogSpec, "s3")


def test_a_blocked_plugin_is_not_registered_and_a_name_cannot_be_taken_twice():
    mgr = _manager(disabled_plugins=("p0",))
    assert mgr.register(_Stores(_spec("a", "my")), "p0") is None and not mgr.has_plugin("p0")
    mgr.register(_Stores(_spec("b", "my")), "p1")
    with pytest.raises(PluginError, match="registered already"):
        mgr.register(_Stores(), "p1")


class _BadConfigure:
    @hookimpl
    def blobstate_configure(self, config):  # noqa: ANN001, ANN201
        raise RuntimeError("cannot configure")


class _Misspelled:
    @hookimpl
    def blobstate_blob_storez(self):  # noqa: ANN201
        return []


def test_a_plugin_whose_configure_raises_is_dropped_as_broken_and_the_others_stay():
    mgr = _manager()
    mgr.configure({"k": 1})
    with pytest.warns(UserWarning, match="'bad' is broken"):
        assert mgr.register(_BadConfigure(), "bad") is None
    mgr.register(_Stores(_spec("a", "my")), "good")
    assert not mgr.has_plugin("bad") and mgr.select(BlobStoreSpec, "my").plugin == "good"
    [broken] = [i for i in mgr.plugin_infos() if i.error]
    assert broken.name == "bad" and "blobstate_configure raised RuntimeError: cannot configure" in broken.error


def test_a_plugin_implementing_an_unknown_hook_is_dropped_by_drop_invalid():
    mgr = _manager(_Misspelled(), _Stores(_spec("a", "my")))
    with pytest.raises(PluginError, match="blobstate_blob_storez"):
        mgr.check_pending()
    with pytest.warns(UserWarning, match="unknown hook"):
        mgr.drop_invalid()
    mgr.check_pending()
    assert not mgr.has_plugin("p0") and mgr.has_plugin("p1")


def test_an_observer_that_raises_is_logged_never_raised(caplog):
    class Observer:
        @hookimpl
        def blobstate_journal_event(self, event, store_key):  # noqa: ANN001, ANN201
            raise RuntimeError("observer down")

    mgr = _manager(Observer())
    with caplog.at_level(logging.WARNING, logger="blobstate.plugin.manager"):
        mgr.emit("blobstate_journal_event", event=object(), store_key="job/0/s")
    assert any("blobstate_journal_event observer raised" in r.getMessage() for r in caplog.records)


def test_spec_keys_are_schemes_a_store_type_or_a_providers_name():
    assert spec_keys(_spec("a", "s3", "s3a")) == ("s3", "s3a")
    assert spec_keys(LocalStoreSpec(name="r", store_type="rocksdb", factory="x:y")) == ("rocksdb",)
    assert spec_keys(KeyProviderSpec(name="aws-kms", factory="x:y")) == ("aws-kms",)


def test_load_reference_reads_a_module_or_an_attribute_path_ignoring_extras():
    assert load_reference("os.path") is os.path
    assert load_reference("os.path:join [extra]") is os.path.join
    with pytest.raises(ModuleNotFoundError):
        load_reference("no_such_module_here")


def test_the_built_ins_serve_file_urls_and_a_blocked_built_in_does_not():
    mgr = build_plugin_manager(Settings(), autoload=False)
    assert mgr.select(BlobStoreSpec, "file").distribution == "blobstate"
    assert {i.name for i in mgr.plugin_infos() if i.builtin} and not [i for i in mgr.plugin_infos() if i.error]
    owner = mgr.select(BlobStoreSpec, "file").plugin
    blocked = build_plugin_manager(Settings(disabled_plugins=(owner,)), autoload=False)
    assert not blocked.has_plugin(owner)
    with pytest.raises(ConfigurationError, match="no blob store for 'file'"):
        blocked.select(BlobStoreSpec, "file")


_PROBE_MODULE = '''
from blobstate.plugin.hookspecs import hookimpl
from blobstate.plugin.records import CheckpointLogSpec


@hookimpl
def blobstate_checkpoint_logs():
    return [CheckpointLogSpec(name="probe", schemes=("probe",), factory="nowhere:open_log")]
'''


@pytest.fixture
def probe_plugin(tmp_path, monkeypatch):
    """The name of a plugin module (importable for this test) giving a checkpoint log for ``probe``; the
    process-wide managers are dropped before and after."""
    from blobstate.plugin.manager import reset_plugin_manager

    (tmp_path / "blobstate_probe_plugin.py").write_text(_PROBE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    reset_plugin_manager()
    yield "blobstate_probe_plugin"
    reset_plugin_manager()


def test_the_process_wide_manager_is_the_one_the_settings_ask_for_whichever_came_first(probe_plugin):
    from blobstate.plugin.manager import get_plugin_manager

    plain = get_plugin_manager(Settings(plugins_autoload=False))  # first use: settings without the plugin
    asked = get_plugin_manager(Settings(plugins_autoload=False, plugins=(probe_plugin,)))
    assert asked.has_plugin(probe_plugin) and not plain.has_plugin(probe_plugin)
    assert asked.select(CheckpointLogSpec, "probe").spec.name == "probe"
    with pytest.raises(ConfigurationError, match="no checkpoint log for 'probe'"):
        plain.select(CheckpointLogSpec, "probe", exact=True)
    # built once per plugin settings: fields that do not concern plugins share a manager
    assert get_plugin_manager(Settings(plugins_autoload=False, work_dir="elsewhere")) is plain
    assert get_plugin_manager(Settings(plugins_autoload=False, plugins=(probe_plugin,), debug=True)) is asked
    blocked = get_plugin_manager(Settings(plugins_autoload=False, plugins=(probe_plugin,),
                                          disabled_plugins=(probe_plugin,)))
    assert blocked is not asked and not blocked.has_plugin(probe_plugin)


def test_a_manager_handed_in_is_the_one_its_own_settings_get(probe_plugin):
    from blobstate.plugin.manager import get_plugin_manager, reset_plugin_manager

    settings = Settings(plugins_autoload=False, plugins=(probe_plugin,))
    mine = build_plugin_manager(settings)
    reset_plugin_manager(mine)
    assert get_plugin_manager(settings) is mine
    assert get_plugin_manager(Settings(plugins_autoload=False)) is not mine


def test_exact_selection_leaves_out_the_catch_all():
    mgr = _manager(_Stores(_spec("generic", "*"), _spec("s3", "s3", priority=10)))
    assert mgr.select(BlobStoreSpec, "s3", exact=True).spec.name == "s3"
    assert mgr.select(BlobStoreSpec, "delayed").spec.name == "generic"
    with pytest.raises(ConfigurationError, match="no blob store for 'delayed'"):
        mgr.select(BlobStoreSpec, "delayed", exact=True)
