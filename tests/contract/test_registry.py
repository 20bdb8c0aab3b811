"""Backend registration is separate from implementation: building the registry imports no backend, and a missing
optional dependency is reported one way, with the registration record's install hint."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from blobstate.errors import MissingDependencyError
from blobstate.plugin.records import BlobStoreSpec, LocalStoreSpec, instantiate

IMPLEMENTATIONS = ("fsspec_store", "s3_store", "gcs_store", "azure_store", "file_log", "sql_log", "kafka",
                   "rocksdb_store", "dir_store")


def test_building_the_registry_imports_no_backend():
    code = textwrap.dedent("""
        import sys
        from blobstate.plugin.manager import get_plugin_manager
        specs = get_plugin_manager().registered_specs()
        assert len(specs) >= 10, specs
        loaded = sorted(m for m in sys.modules if m.startswith("blobstate.plugins."))
        print(",".join(loaded))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"})
    loaded = [m for m in out.stdout.strip().split(",") if m and m != "blobstate.plugins.registry"]
    assert not [m for m in loaded if m.rsplit(".", 1)[-1] in IMPLEMENTATIONS], loaded


@pytest.fixture
def fake_backends(tmp_path, monkeypatch):
    """Two backend modules: one imports a missing package at import time, one only when constructed."""
    (tmp_path / "needs_missing_at_import.py").write_text("import blobstate_no_such_dependency\nclass Store: ...\n")
    (tmp_path / "needs_missing_at_build.py").write_text(
        "class Store:\n    def __init__(self, url, **kw):\n        import blobstate_no_such_driver\n")
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.parametrize("module, missing", [("needs_missing_at_import", "blobstate_no_such_dependency"),
                                             ("needs_missing_at_build", "blobstate_no_such_driver")])
def test_missing_dependency_names_it_and_the_install_hint(fake_backends, module, missing):
    spec = BlobStoreSpec(name="fake", schemes=("fake",), factory=f"{module}:Store", install_hint="pip install fake")
    with pytest.raises(MissingDependencyError) as info:
        instantiate(spec, "blob store 'fake'", "fake://x")
    assert missing in str(info.value) and "install it with: pip install fake" in str(info.value)
    assert info.value.exit_code == 2


def test_a_local_store_record_resolves_lazily():
    spec = LocalStoreSpec(name="dir", store_type="dir", factory="blobstate.plugins.dir_store:DirStore")
    assert type(instantiate(spec, "local store 'dir'")).__name__ == "DirStore"
