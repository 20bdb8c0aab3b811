"""``blobstate.plugin.hookspecs``: the contract a plugin is checked against, on a bare pluggy manager holding only
these specs. An implementation naming an argument the spec lacks is refused at registration; one taking fewer gets
those; ``blobstate_configure`` is historic (a plugin registered later still gets the configuration); backend hooks
collect every plugin's records; only ``blobstate``'s own marker counts."""

from __future__ import annotations

import inspect

import pluggy
import pytest

from blobstate.plugin import hookspecs
from blobstate.plugin.hookspecs import PROJECT, hookimpl
from blobstate.plugin.records import BlobStoreSpec, KeyProviderSpec

SPECS = ["blobstate_blob_stores", "blobstate_checkpoint_logs", "blobstate_local_stores", "blobstate_key_providers",
         "blobstate_journal_event", "blobstate_configure"]


@pytest.fixture
def pm():
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


def test_the_specs_are_the_documented_hooks_each_with_an_example():
    found = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("blobstate_")]
    assert sorted(found) == sorted(SPECS) and PROJECT == "blobstate"
    for name in SPECS:
        doc = inspect.getdoc(getattr(hookspecs, name))
        assert "Example::" in doc and "@hookimpl" in doc and f"def {name}(" in doc


def test_an_implementation_with_an_argument_the_spec_lacks_is_refused(pm):
    class Wrong:
        @hookimpl
        def blobstate_journal_event(self, event, store_key, when):
            pass

    with pytest.raises(pluggy.PluginValidationError, match="when"):
        pm.register(Wrong(), "wrong")


def test_an_implementation_takes_only_the_arguments_it_names(pm):
    seen = []

    class Counter:
        @hookimpl
        def blobstate_journal_event(self, store_key):
            seen.append(store_key)

    pm.register(Counter(), "counter")
    pm.hook.blobstate_journal_event(event="an event", store_key="j/t/s")
    assert seen == ["j/t/s"]


def test_configure_reaches_a_plugin_registered_after_it_was_called(pm):
    got = []

    class Early:
        @hookimpl
        def blobstate_configure(self, config, settings):
            got.append(("early", config["command"], settings))

    class Late:
        @hookimpl
        def blobstate_configure(self, config):
            got.append(("late", config["command"]))

    pm.register(Early(), "early")
    pm.hook.blobstate_configure.call_historic(kwargs={"config": {"command": "backup"}, "settings": "S"})
    pm.register(Late(), "late")
    assert got == [("early", "backup", "S"), ("late", "backup")]


def test_backend_hooks_collect_the_records_of_every_plugin(pm):
    s3 = BlobStoreSpec(name="s3", schemes=("s3",), factory="x:y")
    kms = KeyProviderSpec(name="kms", factory="k:m")

    class One:
        @hookimpl
        def blobstate_blob_stores(self):
            return [s3]

    class Two:
        @hookimpl
        def blobstate_blob_stores(self):
            return []

        @hookimpl
        def blobstate_key_providers(self):
            return [kms]

    pm.register(One(), "one")
    pm.register(Two(), "two")
    assert sorted(pm.hook.blobstate_blob_stores(), key=len) == [[], [s3]]
    assert pm.hook.blobstate_key_providers() == [[kms]]
    assert pm.hook.blobstate_local_stores() == [] and pm.hook.blobstate_checkpoint_logs() == []


def test_another_projects_marker_is_not_an_implementation(pm):
    other = pluggy.HookimplMarker("not-blobstate")

    class Foreign:
        @other
        def blobstate_blob_stores(self):
            return ["never"]

    pm.register(Foreign(), "foreign")
    assert pm.hook.blobstate_blob_stores() == []
