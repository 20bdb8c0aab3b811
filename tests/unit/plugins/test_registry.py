"""``blobstate.plugins.registry``: the one table of the built-in backends. Every dotted path names something its
module defines (read from the module's source, nothing imported), no two records of a kind tie for a scheme, a
backend that needs an extra says how to install that extra (one of ``pyproject.toml``'s), and each entry becomes a
plugin whose hooks give exactly its records (``tests/contract/test_registry.py``: building it imports no backend)."""

from __future__ import annotations

import ast
import importlib.util
import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from blobstate.plugin.records import BlobStoreSpec, CheckpointLogSpec, KeyProviderSpec, LocalStoreSpec, hint_text
from blobstate.plugins import registry
from blobstate.plugins.registry import KNOWN_IMPLEMENTATIONS, TablePlugin, builtin_plugins

ROOT = Path(__file__).resolve().parents[3]
RECORDS = [(name, spec) for name, specs in KNOWN_IMPLEMENTATIONS.items() for spec in specs]


def defined(dotted: str) -> bool:
    """True when ``module:attr`` names a class, function or assignment at the top of the module's source."""
    module, _, attr = dotted.partition(":")
    origin = importlib.util.find_spec(module).origin
    tree = ast.parse(Path(origin).read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    names |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    return attr in names


@pytest.mark.parametrize("name, spec", RECORDS, ids=[f"{n}-{s.name}" for n, s in RECORDS])
def test_every_dotted_path_names_what_its_module_defines(name, spec):
    assert spec.factory.startswith(f"{registry.PKG}.") and defined(spec.factory), spec.factory
    detect = getattr(spec, "detect", None)
    assert detect is None or defined(detect), detect


def test_the_names_are_unique_per_kind_and_no_two_records_of_a_kind_tie_for_a_scheme():
    assert len({(type(spec), spec.name) for _, spec in RECORDS}) == len(RECORDS)
    for kind in (BlobStoreSpec, CheckpointLogSpec):
        served = Counter((scheme, spec.priority) for _, spec in RECORDS if isinstance(spec, kind)
                         for scheme in spec.schemes)
        assert all(n == 1 for n in served.values()), served
    local = [spec.store_type for _, spec in RECORDS if isinstance(spec, LocalStoreSpec)]
    assert sorted(local) == ["dir", "rocksdb"]


def test_the_fallbacks_serve_every_scheme_below_every_specific_backend():
    fallbacks = [spec for _, spec in RECORDS if "*" in getattr(spec, "schemes", ())]
    assert {(type(s), s.priority) for s in fallbacks} == {(BlobStoreSpec, -100), (CheckpointLogSpec, -100)}
    assert all(spec.priority > -100 for _, spec in RECORDS if spec not in fallbacks)


def test_a_backend_that_needs_an_extra_names_one_of_pyprojects_extras_and_the_others_need_none():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    needs = {}
    for _, spec in RECORDS:
        if spec.install_hint:
            text = hint_text(spec.install_hint)
            found = set(re.findall(r"\[(\w+)\]", text))
            assert len(found) == 1 and found <= extras, text
            needs[spec.name] = found.pop()
    assert needs == {"s3": "s3", "gcs": "gcs", "azure": "azure", "sql": "sql", "kafka": "kafka", "file": "encrypt"}


def test_each_entry_is_a_plugin_whose_hooks_give_exactly_its_records():
    plugins = builtin_plugins()
    assert list(plugins) == [*KNOWN_IMPLEMENTATIONS, "steplog"]
    for name, specs in KNOWN_IMPLEMENTATIONS.items():
        plugin = plugins[name]
        assert isinstance(plugin, TablePlugin)
        given = (plugin.blobstate_blob_stores() + plugin.blobstate_checkpoint_logs() + plugin.blobstate_local_stores()
                 + plugin.blobstate_key_providers())
        assert sorted(given, key=lambda s: s.name) == sorted(specs, key=lambda s: s.name)
    assert repr(plugins["fsspec"]) == "TablePlugin(fsspec, fsspec-generic)"


def test_a_table_plugin_sorts_any_records_by_kind():
    records = [KeyProviderSpec(name="k", factory="a:b"), LocalStoreSpec(name="l", store_type="l", factory="a:b"),
               BlobStoreSpec(name="b", schemes=("b",), factory="a:b")]
    plugin = TablePlugin(iter(records))
    assert plugin.blobstate_key_providers() == records[:1] and plugin.blobstate_local_stores() == records[1:2]
    assert plugin.blobstate_blob_stores() == records[2:] and plugin.blobstate_checkpoint_logs() == []
