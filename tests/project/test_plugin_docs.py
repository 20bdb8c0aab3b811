"""docs/plugins.md stays true: every hook and every registration-record field is documented, the suites it names
exist, and its examples run (hook examples register cleanly; the example store checkpoints and validates)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sqlite3
import types
from pathlib import Path

import pytest

from blobstate.errors import IntegrityError
from blobstate.plugin import hookspecs
from blobstate.plugin.manager import build_plugin_manager
from blobstate.plugin.records import BlobStoreSpec, CheckpointLogSpec, LocalStoreSpec

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", doc_text(), flags=re.S | re.M)


def hook_names() -> list[str]:
    names = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
             if hasattr(fn, f"{hookspecs.PROJECT}_spec")]
    assert len(names) >= 5, "found too few hook specs: is the marker attribute still named like this?"
    return names


@pytest.mark.parametrize("hook", hook_names())
def test_every_hook_has_a_section(hook):
    headings = re.findall(r"^### `(\w+)\(", doc_text(), flags=re.M)
    assert hook in headings, f"docs/plugins.md has no '### `{hook}(...)`' section"


def test_no_section_for_a_hook_that_does_not_exist():
    headings = set(re.findall(r"^### `(blobstate_\w+)\(", doc_text(), flags=re.M))
    assert headings == set(hook_names())


@pytest.mark.parametrize("record", [BlobStoreSpec, CheckpointLogSpec, LocalStoreSpec], ids=lambda c: c.__name__)
def test_every_record_field_is_documented(record):
    text = doc_text()
    assert f"`{record.__name__}`" in text
    for field in dataclasses.fields(record):
        assert f"`{field.name}`" in text, f"{record.__name__}.{field.name} is not documented"


def test_named_suites_exist():
    rows = re.findall(r"^\| `(blobstate\.testing\.\w+)` \| `(\w+)` \|", doc_text(), flags=re.M)
    assert {module for module, _ in rows} == {"blobstate.testing.blobstores", "blobstate.testing.checkpoint_logs",
                                              "blobstate.testing.local_stores"}
    for module, cls in rows:
        assert inspect.isclass(getattr(importlib.import_module(module), cls)), f"{module}.{cls}"


def test_python_examples_compile():
    blocks = code_blocks("python")
    assert len(blocks) >= 7
    for number, block in enumerate(blocks):
        compile(block, f"docs/plugins.md python block {number}", "exec")


def test_hook_examples_register_without_unknown_hooks():
    """Each example with @hookimpl, loaded as a plugin module: no misspelled hook, every documented hook shown."""
    mgr = build_plugin_manager(autoload=False)
    shown: set[str] = set()
    for number, block in enumerate(b for b in code_blocks("python") if "@hookimpl" in b):
        module = types.ModuleType(f"docs_example_{number}")
        exec(compile(block, module.__name__, "exec"), module.__dict__)  # noqa: S102 - our own documentation
        mgr.register(module, module.__name__)
        shown |= {name for name in vars(module) if name.startswith("blobstate_")}
    mgr.check_pending()
    assert shown == set(hook_names())


def test_toml_examples_parse_and_name_the_entry_point_group():
    tomllib = pytest.importorskip("tomllib")
    blocks = code_blocks("toml")
    assert blocks
    for block in blocks:
        assert "blobstate" in tomllib.loads(block)["project"]["entry-points"]


def test_the_example_store_works(tmp_path):
    block = next(b for b in code_blocks("python") if "class SqliteStore(LocalStore)" in b)
    namespace: dict = {"__name__": "docs_example_store"}
    exec(compile(block, "docs example store", "exec"), namespace)  # noqa: S102
    store = namespace["SqliteStore"]()
    (tmp_path / "src").mkdir()
    conn = sqlite3.connect(tmp_path / "src" / "a.db")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (42)")
    conn.commit()
    conn.close()
    store.create_checkpoint(str(tmp_path / "src"), str(tmp_path / "cp"))
    with pytest.raises(FileExistsError):
        store.create_checkpoint(str(tmp_path / "src"), str(tmp_path / "cp"))
    store.validate(str(tmp_path / "cp"))
    check = sqlite3.connect(tmp_path / "cp" / "a.db")
    assert check.execute("SELECT x FROM t").fetchall() == [(42,)]
    check.close()
    (tmp_path / "cp" / "a.db").write_bytes(b"\x00" * 4096)
    with pytest.raises(IntegrityError):
        store.validate(str(tmp_path / "cp"))
