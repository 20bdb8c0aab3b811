"""``blobstate.plugin.records``: a factory named by a dotted path is imported only when resolved, a missing
dependency is reported one way (what needs it, which module, how to install it), a wrong path is a
``PluginError`` naming it, and the install hint names this installation's own source as pip recorded it (real
modules and a real ``.dist-info`` under ``tmp_path``, put first on ``sys.path``)."""

from __future__ import annotations

import json
import sys

import pytest

from blobstate.errors import MissingDependencyError, PluginError
from blobstate.plugin import records as r
from blobstate.plugin.records import BlobStoreSpec, LocalStoreSpec, instantiate, resolve_factory


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """A package ``fakeplug`` on ``sys.path``: ``ok`` (a factory), ``needs_dep`` (imports a module that is not
    installed), ``builds_dep`` (whose factory imports one when called)."""
    pkg = tmp_path / "fakeplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ok.py").write_text("class Store:\n    def __init__(self, *a, **k):\n        self.args = (a, k)\n")
    (pkg / "needs_dep.py").write_text("import no_such_sdk_xyz\nStore = object\n")
    (pkg / "builds_dep.py").write_text("def Store(*a, **k):\n    import no_such_driver_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "fakeplug"
    for name in [m for m in sys.modules if m.startswith("fakeplug")]:
        del sys.modules[name]


def test_a_callable_is_its_own_factory():
    assert resolve_factory(dict, what="x") is dict


@pytest.mark.parametrize("path", ["fakeplug.ok:Store", "fakeplug.ok.Store"])
def test_a_dotted_path_in_either_form_is_imported_when_resolved(modules, path):
    assert "fakeplug.ok" not in sys.modules
    factory = resolve_factory(path, what="blob store 'ok'")
    assert factory.__name__ == "Store" and "fakeplug.ok" in sys.modules


def test_a_missing_dependency_names_what_needs_it_the_module_and_the_hint(modules):
    with pytest.raises(MissingDependencyError, match=r"^blob store 'x' needs no_such_sdk_xyz, which is not "
                                                     r"installed; install it with: pip install x-sdk$") as info:
        resolve_factory("fakeplug.needs_dep:Store", what="blob store 'x'", install_hint="pip install x-sdk")
    assert info.value.exit_code == 2
    with pytest.raises(MissingDependencyError, match=r"needs no_such_sdk_xyz, which is not installed$"):
        resolve_factory("fakeplug.needs_dep:Store", what="blob store 'x'")


def test_a_missing_module_is_a_missing_dependency_too(modules):
    with pytest.raises(MissingDependencyError, match="needs fakeplug.nothing_here"):
        resolve_factory("fakeplug.nothing_here:Store", what="w", install_hint=lambda: "called late")


def test_a_wrong_attribute_is_a_plugin_error_naming_the_module_and_the_name(modules):
    with pytest.raises(PluginError, match=r"^local store 'q': fakeplug.ok has no attribute 'Nope'$"):
        resolve_factory("fakeplug.ok:Nope", what="local store 'q'")


def test_an_import_error_while_constructing_is_a_missing_dependency_with_the_records_hint(modules):
    spec = BlobStoreSpec(name="db", schemes=("db",), factory="fakeplug.builds_dep:Store",
                         install_hint=lambda: "pip install db-driver")
    with pytest.raises(MissingDependencyError, match="checkpoint log 'db' needs no_such_driver_xyz.*pip install "
                                                     "db-driver"):
        instantiate(spec, "checkpoint log 'db'", "db://x")
    made = instantiate(LocalStoreSpec(name="ok", store_type="ok", factory="fakeplug.ok:Store"), "w", 1, k=2)
    assert made.args == ((1,), {"k": 2})


def test_a_hint_is_text_or_a_callable_giving_it():
    assert r.hint_text("pip install a") == "pip install a" and r.hint_text(lambda: "later") == "later"
    assert r.hint_text("") == ""


def test_missing_dependency_without_a_module_name_says_a_module():
    error = r.missing_dependency("the demo", ImportError("something"), "")
    assert isinstance(error, MissingDependencyError) and str(error) == "the demo needs a module, which is not installed"


@pytest.fixture
def installed_from(tmp_path, monkeypatch):
    """Pretend pip recorded where blobstate was installed from: a ``blobstate`` ``.dist-info`` first on ``sys.path``
    with the given ``direct_url.json`` (PEP 610)."""
    def make(direct: dict | None):
        info = tmp_path / "site" / "blobstate-0.1.0.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: blobstate\nVersion: 0.1.0\n")
        if direct is not None:
            (info / "direct_url.json").write_text(json.dumps(direct))
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        r._install_source.cache_clear()
        return info

    yield make
    r._install_source.cache_clear()


def test_an_editable_install_is_told_to_add_the_extra_in_its_clone(installed_from):
    installed_from({"url": "file:///src/blobstate", "dir_info": {"editable": True}})
    assert r.extra_install_hint("s3") == 'pip install -e "/src/blobstate[s3]" (blobstate is installed from that clone)'


def test_a_wheel_install_is_told_to_install_the_extra_from_that_wheel(installed_from):
    installed_from({"url": "file:///dist/blobstate-0.1.0-py3-none-any.whl", "archive_info": {}})
    assert r.extra_install_hint("gcs") == 'pip install "blobstate[gcs] @ file:///dist/blobstate-0.1.0-py3-none-any.whl"'


def test_without_a_record_of_the_source_both_ways_are_named(installed_from):
    installed_from({"url": "https://example.org/blobstate.tar.gz"})
    hint = r.extra_install_hint("kafka")
    assert 'pip install -e ".[kafka]" in a clone of blobstate' in hint and "not on PyPI" in hint


def test_a_damaged_record_is_skipped(installed_from):
    info = installed_from(None)
    (info / "direct_url.json").write_text("{not json")
    assert "[sql]" in r.extra_install_hint("sql")  # whatever comes next on sys.path, never an error
