"""The repository layout is known in one module (issue 28): no code outside ``blobstate.model.layout`` spells a path
piece of it (``blobs``, ``indexes``, ``ttl``, ``checkpoints``, ``doctor`` as a segment of a string, or the marker's
name). Docstrings may name them for the reader; the conformance kits and the simulator (``core/testing``) are test
code that writes example objects of its own, as a plugin author's tests would."""

from __future__ import annotations

import ast
from pathlib import Path

from blobstate.model import layout

ROOT = Path(__file__).resolve().parents[2]
PIECES = {layout.BLOBS, layout.INDEXES, layout.LEASES, layout.RECORDS, layout.SCRATCH}
SKIPPED = (ROOT / "core" / "model" / "layout.py", ROOT / "core" / "testing")
#: Strings that hold a piece's word without naming the layout: (file, string) -> why.
ALLOWED = {
    ("core/cli/__init__.py", "doctor"): "the command's name",
    ("core/cli/main_recover.py", "blobs"): "a JSON field",
    ("core/maintenance/catalog.py", "blobs"): "a JSON field",
    ("core/model/index.py", "blobs"): "a JSON field (a file's chunks)",
    ("core/maintenance/catalog.py", "checkpoints"): "a JSON field",
    ("core/maintenance/doctor.py", "checkpoints"): "the name of a check, and a JSON field",
    ("core/local/workdir.py", "checkpoints"): "the work directory's folder of local checkpoints",
}


def spelled(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, string)`` of every string constant of ``tree`` (f-string parts included, docstrings not) that
    spells a path piece of the layout."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and (layout.MARKER in node.value or PIECES & set(node.value.split("/")))]


def test_the_check_finds_a_piece_spelled_in_code_and_not_in_a_docstring():
    code = '"""Lists blobs/ and ttl/."""\ndef f(key):\n    """The indexes/."""\n    return f"{key}/blobs", "ttl/"\n'
    assert sorted(text for _, text in spelled(ast.parse(code))) == ["/blobs", "ttl/"]
    assert spelled(ast.parse(f"MARKER = {layout.MARKER!r}"))


def test_no_module_but_the_layout_spells_a_path_piece_of_it():
    found = []
    for folder in ("core", "plugins", "journal", "spark"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if any(path == s or s in path.parents for s in SKIPPED):
                continue
            rel = str(path.relative_to(ROOT))
            found += [f"{rel}:{line}: {text!r}" for line, text in spelled(ast.parse(path.read_text()))
                      if (rel, text) not in ALLOWED]
    assert not found, "name these through blobstate.model.layout:\n" + "\n".join(found)
