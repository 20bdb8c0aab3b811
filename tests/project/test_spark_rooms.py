"""The rooms of ``blobstate.spark`` (issue 40), checked from the code's own import statements: every ``import`` and
``from ... import`` of every module, at its top, inside a function (a lazy import) or under ``TYPE_CHECKING``, read
with ``ast`` (nothing is imported).

- The executor side (every module under a folder named ``executor``: what runs in a Spark task) never imports the
  driver side: of ``blobstate.spark`` only the executor side and ``blobstate.spark.errors``.
- The executor side reaches the core through one door: of the rest of ``blobstate`` only the rooms every room uses
  (``errors``, ``model``, ``local``) and ``blobstate.worker``; so ``blobstate.commit.group`` (the group
  commit) is the driver's alone.
- Nothing imports upward: each room stands on a floor (``FLOORS``) and imports only its own and lower floors.
- No circles inside ``blobstate.spark``, module to module.
- One errors module: no other module of ``blobstate.spark`` defines an exception class.
- Every room's ``__init__`` is one docstring saying what the room holds and what it may import, and nothing else.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPARK = ROOT / "spark"
PACKAGE = "blobstate.spark"

#: each room of ``spark/`` (a folder, or the top-level module ``errors``; ``__init__`` is the package's face) -> its
#: floor: a room imports only rooms on its own floor or lower ones. A new room is given its floor here.
FLOORS = {
    "errors": 0,  # every error of the package
    "executor": 1,  # what every task on an executor shares
    "committed": 2,  # what Spark committed: its checkpoint location, the alignment, the listener
    "placement": 2,  # blobstate's StateStoreCoordinator
    "binding": 3,  # the driver binding
    "partitioned": 3,  # partitioned state, driver and executor sides
    "processor": 4,  # the stateful-processor runtime (on partitioned state)
    "data": 4,  # state as data: read, write, rescale
    "__init__": 5,  # the public face, blobstate.spark
    "demo": 6,  # blobstate demo, through the public face
}
#: what the executor side may import of the core (outside blobstate.spark): the rooms every room uses, and the door
EXECUTOR_CORE = ("blobstate.errors", "blobstate.config", "blobstate.model", "blobstate.local", "blobstate.worker")


def modules(root: Path = SPARK, package: str = PACKAGE) -> dict[str, Path]:
    """``{dotted module name: path}`` of every module under ``root`` (a package ``__init__`` by its package name)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"] if rel.name == "__init__" else list(rel.parts)
        out[".".join([package, *parts])] = path
    return out


def imports(path: Path, known: set[str]) -> set[str]:
    """The ``blobstate`` modules ``path`` imports: ``from X import a`` is ``X.a`` when that is a module of ``known``,
    else ``X``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in known else node.module)
    return {m for m in out if m == "blobstate" or m.startswith("blobstate.")}


def graph(root: Path = SPARK, package: str = PACKAGE) -> dict[str, set[str]]:
    """Every module of ``root`` -> the ``blobstate`` modules it imports."""
    found = modules(root, package)
    return {name: imports(path, set(found)) for name, path in found.items()}


def room_of(module: str, package: str = PACKAGE) -> str:
    """The room of a module of ``package``: its first folder, ``errors``, or ``__init__`` for the package itself."""
    rest = module[len(package):].lstrip(".")
    return rest.split(".")[0] if rest else "__init__"


def is_executor(module: str, package: str = PACKAGE) -> bool:
    return "executor" in module[len(package):].split(".")


def inside(module: str, package: str = PACKAGE) -> bool:
    return module == package or module.startswith(package + ".")


def executor_violations(edges: dict[str, set[str]], package: str = PACKAGE) -> list[str]:
    """The imports of the executor side that reach the driver side or the core beside its door."""
    bad = []
    for module, targets in sorted(edges.items()):
        if not is_executor(module, package):
            continue
        for target in sorted(targets):
            if inside(target, package):
                ok = is_executor(target, package) or target == f"{package}.errors"
            else:
                ok = any(target == allowed or target.startswith(allowed + ".") for allowed in EXECUTOR_CORE)
            if not ok:
                bad.append(f"{module} -> {target}")
    return bad


def upward(edges: dict[str, set[str]], package: str = PACKAGE) -> list[str]:
    """The imports of one room of ``package`` into a room on a higher floor."""
    bad = []
    for module, targets in sorted(edges.items()):
        for target in sorted(t for t in targets if inside(t, package)):
            here, there = room_of(module, package), room_of(target, package)
            if FLOORS[there] > FLOORS[here]:
                bad.append(f"{module} (floor {FLOORS[here]}) -> {target} (floor {FLOORS[there]})")
    return bad


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles among the modules of ``edges`` (Tarjan's strongly connected components of two or more
    modules, or one importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def error_classes(path: Path) -> list[str]:
    """The classes ``path`` defines at its top level whose bases name an error or exception."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef) and any(
        isinstance(base, ast.Name | ast.Attribute) and ast.unparse(base).endswith(
            ("Error", "Exception", "Refused", "Unavailable", "NotEmpty", "Rows", "Committed", "Written", "Restore"))
        for base in node.bases)]


# -- the rules, on the tree ----------------------------------------------------------------------------------------
def test_every_room_has_a_floor():
    rooms = {room_of(m) for m in modules()}
    assert not rooms - set(FLOORS), f"rooms of spark/ without a floor in FLOORS: {sorted(rooms - set(FLOORS))}"


def test_the_executor_side_never_imports_the_driver_side_and_enters_the_core_through_one_door():
    edges = graph()
    assert any(is_executor(m) for m in edges)
    assert not executor_violations(edges), "\n".join(executor_violations(edges))


def test_the_group_commit_is_the_drivers_alone():
    edges = graph()
    users = sorted(m for m, targets in edges.items() if "blobstate.commit.group" in targets)
    assert users and not [m for m in users if is_executor(m)], users


def test_nothing_in_spark_imports_upward():
    assert not upward(graph()), "\n".join(upward(graph()))


def test_no_circles_inside_spark():
    assert not circles(graph()), circles(graph())


def test_one_errors_module():
    defined = {str(path.relative_to(ROOT)): error_classes(path) for path in modules().values()}
    elsewhere = {path: names for path, names in defined.items() if names and path != "spark/errors.py"}
    assert not elsewhere, f"error classes outside spark/errors.py: {elsewhere}"
    assert len(defined["spark/errors.py"]) >= 10


@pytest.mark.parametrize("init", sorted(p for p in SPARK.rglob("__init__.py") if p.parent != SPARK),
                         ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_each_room_opens_with_one_paragraph_of_what_it_holds_and_may_import(init):
    tree = ast.parse(init.read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree)
    assert doc, f"{init.relative_to(ROOT)} has no docstring"
    defines = [n for n in tree.body[1:] if not isinstance(n, ast.Import | ast.ImportFrom | ast.Assign)]
    assert not defines, f"{init.relative_to(ROOT)} defines code: a room's __init__ only opens it"
    assert "may import" in " ".join(doc.split()), f"{init.relative_to(ROOT)}: its docstring names no imports"


# -- the checks themselves, on a tree made here ----------------------------------------------------------------------
def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return graph(tmp_path, PACKAGE)


def test_the_checks_see_a_lazy_import_an_upward_import_and_a_circle(tmp_path):
    edges = _tree(tmp_path, {
        "__init__.py": "",
        "errors.py": "",
        "executor/__init__.py": "",
        "executor/task.py": "def f():\n    from blobstate.commit.group import GroupCommitter\n"
                            "    from blobstate.spark.binding.engine import x\n",
        "binding/__init__.py": "",
        "binding/engine.py": "from blobstate.spark.data import read\n",
        "data/__init__.py": "",
        "data/read.py": "from blobstate.spark.data.write import y\n",
        "data/write.py": "from typing import TYPE_CHECKING\n"
                         "if TYPE_CHECKING:\n    from blobstate.spark.data.read import z\n",
    })
    assert executor_violations(edges) == ["blobstate.spark.executor.task -> blobstate.commit.group",
                                          "blobstate.spark.executor.task -> blobstate.spark.binding.engine"]
    assert upward(edges) == ["blobstate.spark.binding.engine (floor 3) -> blobstate.spark.data.read (floor 4)",
                             "blobstate.spark.executor.task (floor 1) -> blobstate.spark.binding.engine (floor 3)"]
    assert circles(edges) == [["blobstate.spark.data.read", "blobstate.spark.data.write"]]
