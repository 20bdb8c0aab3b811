"""The documentation site (issue 43): ``mkdocs build --strict`` passes (a warning, a broken link or anchor, a page
missing from the nav, a broken table among them, fails it), every public name of ``blobstate``, ``blobstate.spark``
and the plugin interfaces is in the API reference with its docstring, every page's code blocks parse (the runnable
ones run: ``tests/e2e/test_doc_pages.py``), and the build hooks (``docs/_hooks``) do what they say.

``.ci/install-docs.sh`` installs the ``docs`` extra; without it the build tests skip, and fail under CI."""

from __future__ import annotations

import html
import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", flags=re.S | re.M)


def hook(name: str) -> ModuleType:
    """A build hook of docs/_hooks, imported from its file (it is no package of the project)."""
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "_hooks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pages() -> list[Path]:
    """Every Markdown page of the site's sources: docs/ (but the hooks) and the README (the front page)."""
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as CI builds it: ``mkdocs build --strict`` (its output is checked by the first test)."""
    if importlib.util.find_spec("mkdocs") is None:
        if os.environ.get("CI"):
            pytest.fail("mkdocs is not installed: .ci/install-docs.sh installs the docs extra")
        pytest.skip("the docs extra is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    (out / "build.log").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    return out


def words_of(page: Path) -> str:
    """A built page's words (tags removed, entities decoded, punctuation and markup dropped), space-separated."""
    raw = html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))
    return " ".join(re.findall(r"[A-Za-z0-9]+", raw))


def first_words_of_docstring(obj: object) -> str | None:
    """The first 8 words of the docstring of a function or class (its own, not inherited), as ``words_of`` gives
    them; None for other objects (``hookimpl`` is a pluggy marker: its docstring is pluggy's class's)."""
    if not (inspect.isclass(obj) or inspect.isroutine(obj)):
        return None
    doc = inspect.getdoc(obj)
    if not doc or (inspect.isclass(obj) and doc == inspect.getdoc(obj.__mro__[1])):
        return None
    return " ".join(re.findall(r"[A-Za-z0-9]+", doc)[:8])


def assert_documented(site: Path, public: str, path: str, obj: object) -> None:
    """``public`` (defined at ``path``) has its anchor on a reference page, and its docstring's first line there."""
    holders = [page for page in sorted((site / "reference").rglob("index.html"))
               if f'id="{path}"' in page.read_text(encoding="utf-8")]
    assert holders, f"{public} ({path}) is in no reference page"
    expected = first_words_of_docstring(obj)
    if expected:
        assert any(expected in words_of(page) for page in holders), f"{public}: its docstring is not shown: {expected}"


def test_the_site_builds_strictly_with_no_warning(site):
    log = (site / "build.log").read_text()
    assert "WARNING" not in log, log
    assert (site / "index.html").is_file() and (site / "reference" / "blobstate" / "index.html").is_file()


@pytest.mark.parametrize("namespace", ["blobstate", "blobstate.spark"])
def test_every_public_name_is_in_the_reference_with_its_docstring(site, namespace):
    module = importlib.import_module(namespace)
    names = hook("public_names")
    assert len(module.__all__) >= 20
    for name in module.__all__:
        obj = getattr(module, name)
        assert_documented(site, f"{namespace}.{name}", names.defined_at(namespace, name, obj), obj)


@pytest.mark.parametrize("module_name", ["blobstate.plugin.interfaces", "blobstate.plugin.hookspecs",
                                         "blobstate.plugin.records", "blobstate.testing.blobstores",
                                         "blobstate.testing.checkpoint_logs", "blobstate.testing.local_stores",
                                         "blobstate.testing.kit"])
def test_every_public_class_and_function_of_the_plugin_interfaces_is_in_the_reference(site, module_name):
    module = importlib.import_module(module_name)
    own = [(name, obj) for name, obj in vars(module).items()
           if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj))
           and obj.__module__ == module_name]
    assert own, module_name
    for name, obj in own:
        assert_documented(site, f"{module_name}.{name}", f"{module_name}.{name}", obj)


def test_every_page_is_in_the_nav():
    nav = set(re.findall(r":\s*([\w/-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.M))
    on_disk = {str(p.relative_to(DOCS)) for p in pages() if p.parent != ROOT}
    assert on_disk == nav, f"missing from the nav: {sorted(on_disk - nav)}; not on disk: {sorted(nav - on_disk)}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_parses(page, tmp_path):
    """Python blocks compile, bash blocks pass ``bash -n``; output, JSON and TOML blocks are not code to run."""
    for number, (language, code) in enumerate(FENCE.findall(page.read_text(encoding="utf-8")), 1):
        where = f"{page.relative_to(ROOT)} block {number}"
        if language == "python":
            compile(code, where, "exec")
        elif language == "bash":
            script = tmp_path / f"block{number}.sh"
            script.write_text(code)
            check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            assert check.returncode == 0, f"{where}: {check.stderr}"


def test_the_table_check_finds_the_broken_registration_records_table():
    """docs/plugins.md's table as issue 43 found it: two rows cut off from their header by a paragraph."""
    broken = ("| record | selected by |\n| --- | --- |\n| `BlobStoreSpec` | URL scheme |\n\n"
              "A checkpoint log's `storage_options` are ...\n| `LocalStoreSpec` | `store_type` |\n"
              "| `KeyProviderSpec` | `name` |\n")
    problems = hook("tables").table_problems(broken)
    assert problems == ["line 6: a table row outside any table (cut off from its header?)",
                        "line 7: a table row outside any table (cut off from its header?)"]


def test_the_table_check_counts_cells_as_the_site_renders_them():
    tables = hook("tables")
    good = "| a | b |\n| --- | --- |\n| `x\\|y` | `p|q` |\n\n```\n| not a table\n```\n"
    assert tables.table_problems(good) == []
    assert tables.table_problems("| a | b |\n| --- | --- |\n| 1 | 2 | 3 |\n") == [
        "line 3: a row of 3 cells in a table of 2"]
    assert tables.unescape_pipes(good).splitlines()[2] == "| `x|y` | `p|q` |"
    assert tables.unescape_pipes("```\n| `x\\|y` |\n```") == "```\n| `x\\|y` |\n```"


def test_every_page_has_whole_tables():
    tables = hook("tables")
    problems = [f"{page.relative_to(ROOT)}: {p}" for page in pages()
                for p in tables.table_problems(page.read_text(encoding="utf-8"))]
    assert not problems, problems


def test_the_layout_hook_lays_out_every_mapped_package(tmp_path):
    made = hook("import_layout").lay_out(ROOT, tmp_path / "stage")
    assert made["blobstate.spark"] == ROOT / "spark"
    assert (tmp_path / "stage" / "blobstate" / "spark" / "__init__.py").resolve() == ROOT / "spark" / "__init__.py"
    assert (tmp_path / "stage" / "blobstate" / "api.py").resolve() == ROOT / "core" / "api.py"
    assert (tmp_path / "stage" / "blobstate" / "plugins" / "registry.py").resolve() == ROOT / "plugins" / "registry.py"
    hook("import_layout").lay_out(ROOT, tmp_path / "stage")  # again: the old layout is replaced, not merged
