"""The house rules of docs/architecture.md, checked: every ``module:function`` the walkthroughs name exists; a backup
reaches the blob store's ``put`` through each room once (no doubling back); a restore never enters the backup
module; imports run only down the floors of the house (today's exceptions listed, a list that may only shrink), no
import circle anywhere in the package, each room's opening docstring says what it may import, and the
``BLOBSTATE_*`` environment is read in one place."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pickle
import re
import sys
import threading
from pathlib import Path
from typing import Self

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def _named_steps() -> list[str]:
    return sorted(set(re.findall(r"`(blobstate(?:\.\w+)*:[\w.]+)`", DOC.read_text())))


def test_the_walkthroughs_name_only_functions_that_exist():
    steps = _named_steps()
    assert len(steps) >= 20, steps
    for step in steps:
        module_name, _, path = step.partition(":")
        obj = importlib.import_module(module_name)
        for part in path.split("."):
            assert hasattr(obj, part), f"{step}: {obj!r} has no attribute {part!r}"
            obj = getattr(obj, part)


# -- the house: floors, circles, what each room may import ---------------------------------------------------------
#: The folders of the package and their import names.
PACKAGES = {"core": "blobstate", "plugins": "blobstate.plugins", "journal": "blobstate.journal",
            "spark": "blobstate.spark"}
#: The floors of the house, the ground first: a room imports itself and the rooms on the floors below its own, never
#: a room on its own floor (a sibling) or above. ``__init__`` is the package's lazy namespace.
FLOORS = (("errors",), ("config",), ("model",), ("local",), ("journal",), ("plugin",), ("codec",), ("repository",),
          ("entry",), ("commit", "restoring", "maintenance", "plugins"), ("api", "worker"), ("spark",),
          ("__init__", "cli", "testing"))
#: Today's imports that run up or across the floors, each with why. The list may only shrink: a new one fails, and
#: so does an entry whose import is gone (take it out).
UPWARD = {
    ("blobstate.maintenance.doctor", "blobstate.commit.recover"): "doctor lists the open commits of the work base",
    ("blobstate.maintenance.queries", "blobstate.restoring.entries"): "read_state: a store's entries as data",
    ("blobstate.maintenance.queries", "blobstate.restoring.state"): "read_state, read_changes: the state reader",
    ("blobstate.plugin.manager", "blobstate.plugins.registry"): "the built-in plugins, loaded by reference as an "
                                                                "entry point is (BUILTIN_PLUGINS)",
    **{(f"blobstate.plugin.{m}", f"blobstate.plugins.toolkit.{m}"): "an alias kept for third-party plugins"
       for m in ("local_files", "native_ttl", "transfer")},
}
#: Import circles left, each by its modules with why; none since issue 40 (the model and the simulator were the
#: last), and a new one fails.
CIRCLES_LEFT: dict[frozenset[str], str] = {}
#: Names of a module given as text to what imports it: an entry point's ``module:attribute``, and the argument of
#: these functions (a lazy import is an arrow like any other).
_REFERENCE = re.compile(r"blobstate(?:\.\w+)*:[\w.]+")
_LOADERS = {"import_module", "moved_to", "load_reference", "resolve_factory"}


def package_modules() -> dict[str, Path]:
    """Every module of the package by its import name."""
    out = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            out[".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts)))] = path
    return out


def _module_of(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Each module's imports of the package's modules: every ``import`` and ``from ... import`` anywhere in it
    (inside functions, under ``TYPE_CHECKING``), and every module named as text to a loader (``_REFERENCE``,
    ``_LOADERS``)."""
    known = package_modules()
    graph = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        found: set[str | None] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("blobstate"):
                found.update(_module_of(f"{node.module}.{alias.name}", known) for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(_module_of(a.name, known) for a in node.names if a.name.startswith("blobstate"))
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and _REFERENCE.fullmatch(str(node.value.value)):
                found.add(_module_of(str(node.value.value).partition(":")[0], known))
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in _LOADERS:
                found.update(_module_of(a.value.partition(":")[0], known) for a in node.args
                             if isinstance(a, ast.Constant) and str(a.value).startswith("blobstate"))
        graph[name] = {m for m in found if m is not None and m != name}
    return graph


def room(module: str) -> str:
    """The room a module stands in: the first part under ``blobstate`` (``blobstate.entry`` -> ``entry``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def floor(module: str) -> int:
    return next(i for i, rooms in enumerate(FLOORS) if room(module) in rooms)


def upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The imports that run up or across the floors."""
    return {(a, b) for a, targets in graph.items() for b in targets if room(a) != room(b) and floor(b) >= floor(a)}


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The import circles (strongly connected modules, Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.add(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        found.add(frozenset(members))
    return found


def test_every_room_stands_on_a_floor():
    rooms = {room(m) for m in package_modules()}
    placed = {r for rooms_ in FLOORS for r in rooms_}
    assert rooms <= placed, f"rooms on no floor: {sorted(rooms - placed)}"


def test_imports_run_only_down_the_floors():
    found = upward(import_graph())
    new = sorted(found - set(UPWARD))
    assert not new, "imports that run up or across the floors (docs/architecture.md, the rules of the house):\n" + \
        "\n".join(f"  {a} -> {b}" for a, b in new)
    gone = sorted(set(UPWARD) - found)
    assert not gone, f"exceptions that no longer occur: take them out of UPWARD: {gone}"


def test_no_import_circles():
    found = circles(import_graph())
    new = sorted(sorted(c) for c in found - set(CIRCLES_LEFT))
    assert not new, "import circles:\n" + "\n".join(f"  {c}" for c in new)
    gone = sorted(sorted(c) for c in set(CIRCLES_LEFT) - found)
    assert not gone, f"circles broken since: take them out of CIRCLES_LEFT: {gone}"


def test_the_graph_sees_lazy_typed_and_named_imports(tmp_path):
    modules = {"a": "from blobstate.b import x\n", "b": "def f():\n    import blobstate.c\n",
               "c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from blobstate.d import y\n",
               "d": 'TARGET = "blobstate.a:main"\n'}
    for name, body in modules.items():
        (tmp_path / "core" / name).mkdir(parents=True)
        (tmp_path / "core" / name / "__init__.py").write_text(body)
    for folder in ("plugins", "journal", "spark"):
        (tmp_path / folder).mkdir()
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        graph = import_graph()
    finally:
        ROOT = root
    assert graph == {"blobstate.a": {"blobstate.b"}, "blobstate.b": {"blobstate.c"}, "blobstate.c": {"blobstate.d"},
                     "blobstate.d": {"blobstate.a"}}
    assert circles(graph) == {frozenset(graph)}


_MAY_IMPORT = re.compile(r"May import:(.*?)(?:\n\n|\Z)", re.S)


def room_packages() -> dict[str, Path]:
    """The rooms that are folders (but ``spark/``'s own, regrouped apart), by room name, with their ``__init__``."""
    out = {path.parent.name: path for path in sorted((ROOT / "core").glob("*/__init__.py"))}
    out.update(plugins=ROOT / "plugins" / "__init__.py", journal=ROOT / "journal" / "__init__.py")
    return out


def test_each_room_says_what_it_may_import():
    """The room's ``__init__`` opens with what the room is, and a ``May import:`` paragraph naming (as
    ``blobstate.<room>``) the rooms below it that its modules import: every one they do, and none on its floor or
    above."""
    graph = import_graph()
    problems = []
    for name, init in room_packages().items():
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        said = _MAY_IMPORT.search(doc)
        if said is None:
            problems.append(f"{name}: no 'May import:' in {init.relative_to(ROOT)}")
            continue
        named = {room(m) for m in re.findall(r"blobstate(?:\.\w+)+", said.group(1))} - {name}
        level = FLOORS.index(next(rooms for rooms in FLOORS if name in rooms))
        above = sorted(r for r in named if next(i for i, rooms in enumerate(FLOORS) if r in rooms) >= level)
        used = {room(b) for a, targets in graph.items() if room(a) == name for b in targets
                if room(b) != name and (a, b) not in UPWARD}
        if above:
            problems.append(f"{name}: names rooms on its floor or above: {above}")
        if used - named:
            problems.append(f"{name}: imports rooms it does not name: {sorted(used - named)}")
    assert not problems, "\n".join(problems)


#: Where the process's environment is read besides the settings, and why (none of them a blobstate setting).
ENVIRONMENT_READERS = {
    "blobstate.config.settings": "the one place blobstate's own variables are read",
    "blobstate.config.options": "credentials other tools keep there (AWS_*, AZURE_*), only to hide them",
    "blobstate.cli.output": "whether rich may draw (FORCE_COLOR, TTY_COMPATIBLE, TTY_INTERACTIVE)",
    "blobstate.plugins.s3_store": "the AWS SDK's own region and credential variables",
    "blobstate.spark.executor.open_partitions": "Spark's SPARK_REUSE_WORKER",
    "blobstate.spark.placement.helper_jar": "BLOBSTATE_SPARK_HELPER_JAR, a prebuilt JVM helper, read where it is built",
    "blobstate.spark.demo.driver": "the demo's Spark driver sets SPARK_LOCAL_IP and PYSPARK_PYTHON for itself",
    "blobstate.spark.demo.run": "the demo starts its driver with SPARK_LOCAL_IP",
}


def test_the_environment_is_read_in_one_place():
    """No module but those listed touches ``os.environ`` or ``os.getenv``: a setting comes from the ``Settings`` a
    module is handed (``blobstate.config.settings.Settings.from_environ`` reads the variables)."""
    readers = set()
    for name, path in package_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" \
                    and node.attr in ("environ", "getenv", "putenv", "unsetenv"):
                readers.add(name)
    assert readers == set(ENVIRONMENT_READERS), (sorted(readers - set(ENVIRONMENT_READERS)),
                                                 sorted(set(ENVIRONMENT_READERS) - readers))


class _Profiler:
    """Calls itself for every Python call of every thread inside the block (``sys.setprofile``,
    ``threading.setprofile``)."""

    def __enter__(self) -> Self:
        sys.setprofile(self)
        threading.setprofile(self)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


class _CallTrace(_Profiler):
    """Records, for every call into a blobstate module, the chain of distinct blobstate modules on the stack."""

    def __init__(self) -> None:
        self.modules_seen: set[str] = set()
        self.stacks_at: dict[str, list[str]] = {}

    def __call__(self, frame, event, arg):  # noqa: ANN001, ANN204 - sys.setprofile's signature
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("blobstate"):
            return
        self.modules_seen.add(module)
        name = frame.f_code.co_name
        if module == "blobstate.plugins.fsspec_store" and name == "put" and "put" not in self.stacks_at:
            chain, f = [], frame
            while f is not None:
                m = f.f_globals.get("__name__", "")
                # BlobStore.map_concurrent (the interface's batch runner) runs the pipeline's own per-blob step:
                # that frame is the interface layer of the path, not a return into an earlier room.
                if m.startswith("blobstate") and m != "blobstate.plugin.interfaces" and (not chain or chain[-1] != m):
                    chain.append(m)
                f = f.f_back
            self.stacks_at["put"] = list(reversed(chain))


@pytest.fixture
def dir_store(tmp_path):
    src = tmp_path / "counts"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(os.urandom(1000))
    (src / "sub" / "b.txt").write_bytes(os.urandom(2000))
    return src


def test_a_backup_goes_cli_api_pipeline_store_without_doubling_back(dir_store, tmp_path, monkeypatch):
    from blobstate.cli import main

    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "work"))
    with _CallTrace() as trace:
        result = CliRunner().invoke(main, ["backup", str(dir_store), "--repo", str(tmp_path / "repo"), "-q",
                                                    "--max-concurrency", "1"])
    assert result.exit_code == 0, result.output
    chain = trace.stacks_at["put"]
    rooms = [m for m in chain if m in ("blobstate.cli.main_backup", "blobstate.api", "blobstate.commit.backup",
                                       "blobstate.repository.retry", "blobstate.plugins.fsspec_store")]
    assert rooms == ["blobstate.cli.main_backup", "blobstate.api", "blobstate.commit.backup",
                     "blobstate.repository.retry", "blobstate.plugins.fsspec_store"], chain
    assert len(chain) == len(set(chain)), f"a module appears twice on the way to put: {chain}"


def restored_elsewhere(dir_store, tmp_path, monkeypatch, trace: _Profiler, *options: str) -> None:  # noqa: ANN001
    """Back ``dir_store`` up, then restore it through the CLI on another host (work directory) under ``trace``."""
    from blobstate.cli import main

    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "work"))
    repo = str(tmp_path / "repo")
    assert CliRunner().invoke(main, ["backup", str(dir_store), "--repo", repo, "-q"]).exit_code == 0
    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "other-host"))
    with trace:
        result = CliRunner().invoke(main, ["restore", str(tmp_path / "counts-restored"), "--repo", repo,
                                           "--store", "counts", "-q", *options])
    assert result.exit_code == 0, result.output


def test_a_restore_never_enters_the_backup_module(dir_store, tmp_path, monkeypatch):
    trace = _CallTrace()
    restored_elsewhere(dir_store, tmp_path, monkeypatch, trace)
    assert "blobstate.restoring.snapshot" in trace.modules_seen
    assert "blobstate.commit.backup" not in trace.modules_seen
    assert not any(m.startswith("blobstate.cli.main_") and m != "blobstate.cli.main_restore"
                   for m in trace.modules_seen)


# -- the four walkthroughs, call by call -------------------------------------------------------------------------
#: Rooms every room uses (configuration, the data model, local files, the journal, the plugin interfaces, errors):
#: never a step of a verb's path, so they are left out of the rooms a call passes through.
LIBRARY_ROOMS = {"config", "model", "local", "journal", "plugin", "errors"}


def room_of(module: str) -> str | None:
    """The room of a blobstate module: ``cli``, ``api``, ``spark``, ``commit``, ``restoring``, ``maintenance``,
    ``repository``, each built-in plugin its own (``plugins.fsspec_store``), and ``repository.retry``, the wrapper
    every blob store is used through, as a room of its own (a plugin storing its objects in the repository's blob
    store, as the file log does, passes through it without returning to the repository); None for a library room
    or anything not blobstate's."""
    parts = module.split(".")
    if parts[0] != "blobstate" or len(parts) < 2 or parts[1] in LIBRARY_ROOMS:
        return None
    if parts[1] == "plugins" or module == "blobstate.repository.retry":
        return ".".join(parts[1:3])
    return parts[1]


def rooms_on_stack(frame) -> list[str]:  # noqa: ANN001 - a frame
    """The rooms of the stack ending at ``frame``, outermost first, each run of one room counted once."""
    rooms: list[str] = []
    while frame is not None:
        room = room_of(frame.f_globals.get("__name__", ""))
        if room is not None and (not rooms or rooms[-1] != room):
            rooms.append(room)
        frame = frame.f_back
    return rooms[::-1]


def _interface_methods() -> dict[str, list[type]]:
    """Abstract methods of the plugin interfaces by name: a walkthrough names the interface, a plugin runs it."""
    from blobstate.plugin import interfaces

    out: dict[str, list[type]] = {}
    for cls in vars(interfaces).values():
        if isinstance(cls, type) and cls.__module__ == interfaces.__name__:
            for name in getattr(cls, "__abstractmethods__", ()):
                out.setdefault(name, []).append(cls)
    return out


class _Walk(_Profiler):
    """Records a run (``sys.setprofile`` and ``threading.setprofile``): the first call of every function (by code
    object), the first call of every abstract interface method on an instance of the interface (a plugin's
    implementation), and the rooms on the stack at every call into a built-in plugin."""

    def __init__(self) -> None:
        self.calls = 0
        self.first: dict[object, int] = {}
        self.first_of_interface: dict[tuple[type, str], int] = {}
        self.interfaces = _interface_methods()
        self.plugin_paths: dict[tuple[str, str], set[tuple[str, ...]]] = {}  # (plugin room, function) -> rooms
        self.doubled: set[tuple[str, ...]] = set()

    def __call__(self, frame, event, arg):  # noqa: ANN001, ANN204 - sys.setprofile's signature
        if event != "call":
            return
        self.calls += 1
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("blobstate"):
            return
        self.first.setdefault(code, self.calls)
        for cls in self.interfaces.get(code.co_name, ()):
            if (cls, code.co_name) not in self.first_of_interface and isinstance(frame.f_locals.get("self"), cls):
                self.first_of_interface[(cls, code.co_name)] = self.calls
        if module.startswith("blobstate.plugins."):
            rooms = rooms_on_stack(frame)
            self.plugin_paths.setdefault((room_of(module) or "", code.co_name), set()).add(tuple(rooms))
            if len(rooms) != len(set(rooms)):
                self.doubled.add(tuple(rooms))

    def called_at(self, step: str) -> int | None:
        """When the function a walkthrough step names was first called (None: never)."""
        module_name, _, path = step.partition(":")
        owner, obj = None, importlib.import_module(module_name)
        for part in path.split("."):
            owner, obj = obj, getattr(obj, part)
        if getattr(obj, "__isabstractmethod__", False):
            return self.first_of_interface.get((owner, obj.__name__))
        if inspect.isclass(obj):
            obj = obj.__init__
        obj = getattr(obj, "callback", obj)  # a click command: its function
        return self.first.get(getattr(inspect.unwrap(obj), "__code__", None))


def walkthrough(title: str) -> list[str]:
    """The ``module:function`` steps a section of docs/architecture.md names, in the order it names them."""
    text = DOC.read_text()
    start = text.index(f"\n## {title}")
    section = text[start:text.find("\n## ", start + 1)]
    return list(dict.fromkeys(re.findall(r"`(blobstate(?:\.\w+)*:[\w.]+)`", section)))


def follows(walk: _Walk, title: str, not_in_this_run: dict[str, str]) -> None:
    """Every step of the walkthrough ``title`` was called, first called in the order the walkthrough names it."""
    steps = walkthrough(title)
    assert set(not_in_this_run) <= set(steps), set(not_in_this_run) - set(steps)
    times = [(walk.called_at(step), step) for step in steps if step not in not_in_this_run]
    assert not [step for at, step in times if at is None], [f"never called: {s}" for at, s in times if at is None]
    assert times == sorted(times), "called in another order than the walkthrough says:\n" + "\n".join(
        f"{at:>9} {step}" for at, step in sorted(times))  # type: ignore[type-var]
    assert not walk.doubled, f"a call came back to a room it had passed: {sorted(walk.doubled)}"


NOT_IN_A_FIRST_BACKUP = {
    "blobstate.plugins.s3_store:S3BlobStore.put": "the walkthrough's repository is on S3; here file://",
    "blobstate.model.references:references": "retention's, once a record leaves it (a first backup has none)",
}
NOT_IN_A_PLAIN_REPOSITORY = {"blobstate.codec.log:SealedCheckpointLog": "an encrypted repository's log only"}


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_a_backup_follows_its_walkthrough_call_by_call(dir_store, tmp_path, monkeypatch, encrypted):
    from blobstate.cli import main

    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "work"))
    if encrypted:  # the first backup with a key creates the repository encrypted
        (tmp_path / "state.key").write_bytes(os.urandom(32))
        monkeypatch.setenv("BLOBSTATE_KEY_FILE", str(tmp_path / "state.key"))
    with _Walk() as walk:
        result = CliRunner().invoke(main, ["backup", str(dir_store), "--repo", str(tmp_path / "repo"), "-q",
                                           "--max-concurrency", "1"])  # one thread: every stack whole
    assert result.exit_code == 0, result.output
    follows(walk, "A backup, step by step", NOT_IN_A_FIRST_BACKUP | ({} if encrypted else NOT_IN_A_PLAIN_REPOSITORY))
    assert walk.plugin_paths[("plugins.fsspec_store", "put")] == {  # blobs and the index, through their codec
        ("cli", "api", "commit", "codec", "repository.retry", "plugins.fsspec_store")}
    log_path = ("codec", "plugins.file_log") if encrypted else ("plugins.file_log",)  # the record sealed, or not
    assert ("cli", "api", "commit", *log_path, "repository.retry", "plugins.fsspec_store") in \
        walk.plugin_paths[("plugins.fsspec_store", "put_exclusive")]  # the record (the other: the marker)


def test_a_restore_follows_its_walkthrough_call_by_call(dir_store, tmp_path, monkeypatch):
    walk = _Walk()
    restored_elsewhere(dir_store, tmp_path, monkeypatch, walk, "--max-concurrency", "1")  # one thread: stacks whole
    follows(walk, "A restore, step by step", {
        "blobstate.restoring.swap:recover_interrupted": "only when an earlier restore of the destination was cut off",
        "blobstate.restoring.download:Prefetch": "only into a destination that exists (test_restore_ahead.py)",
        "blobstate.plugin.interfaces:LocalStore.validate": "a RocksDB store's; a directory store has nothing to check",
    })
    assert walk.plugin_paths[("plugins.fsspec_store", "get")] == {  # data blobs, decoded as their index entry says
        ("cli", "api", "restoring", "repository", "codec", "repository.retry", "plugins.fsspec_store")}
    assert not any(code.co_filename.endswith(os.path.join("commit", "backup.py")) for code in walk.first)


def test_a_partitioned_batch_follows_its_walkthrough_call_by_call(tmp_path):
    """At the core level: the partition tasks of one batch called in-process (what Spark's tasks run, without a
    JVM), then the driver's acceptance and group commit; the steps only Spark reaches are named below."""
    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.group import GroupCommitter
    from blobstate.commit.opening import check_current, open_store
    from blobstate.model.records import StoreKey
    from blobstate.repository.repo import Repository
    from blobstate.spark.partitioned.driver.partitioning import align_partitions
    from blobstate.spark.partitioned.driver.state import accept
    from blobstate.spark.partitioned.executor.batch_task import BatchPlan, run_partition
    from blobstate.spark.placement.coordinator import Placement

    def update(db, rows, ctx):  # noqa: ANN001 - the partitioned update function's shape
        for origin, count in rows:
            db.put(origin.encode(), str(count).encode())

    key, repo, parts = StoreKey("flights", "group", "routes"), str(tmp_path / "repo"), 2
    rows = {0: [("JFK", 3), ("EWR", 1)], 1: [("LGA", 2)]}
    with _Walk() as walk, Repository.open(repo) as repository:
        opened = open_store(key, repository, lambda history: align_partitions(
            history, key, num_partitions=parts, key_cols=["origin"], last_committed=None, last_planned=None,
            query_id="q-1", location="/ck", repo_url=repo), committer=lambda: StoreCommitter(
                key, repository, store_type="rocksdb", work_dir=str(tmp_path / "driver")))
        committer = opened.committer
        groups = GroupCommitter(committer, num_partitions=parts)
        check_current(committer, repository.log.latest(key))
        plan = BatchPlan(repo, key, str(tmp_path / "executors"), parts, 0, committer.commit_point.generation(),
                         None, {p: () for p in range(parts)}, "q-1", ttl_ms=3_600_000)
        placement = Placement(parts)
        assert placement.choose([]) == [""] * parts  # no executor known without Spark: where Spark puts them
        prepares = [prepare for p in range(parts) for prepare in run_partition(plan, update, p, rows[p])]
        accepted = accept(prepares, plan)
        group = groups.commit([p.entry for p in accepted], batch_id=0, query_id="q-1",
                              created_ms=min(p.created_ms for p in accepted))
        for p in accepted:
            placement.record(p.partition, p.task.executor)
        committer.close()
    assert group.generation == 1 and len(group.partitions) == parts
    driver, placement_at = "blobstate.spark.partitioned.driver", "blobstate.spark.placement.coordinator"
    follows(walk, "A partitioned batch, step by step", {
        f"{driver}.state:PartitionedState.open": "the driver's, with Spark's checkpoint location",
        f"{driver}.state:PartitionedState.run_batch": "Spark calls it with the batch's DataFrame",
        f"{driver}.partitioning:check_partitioning": "run_batch's, against the DataFrame's key types",
        f"{driver}.job:run_tasks": "the Spark job; here each task is called in-process",
        f"{placement_at}:SparkPlacement.locate": "a restarted driver's, on a SparkContext's executors",
        f"{placement_at}:SparkPlacement.place": "the JVM helper's, on a SparkContext",
        f"{driver}.state:PartitionedState.request_snapshot": "the listener's, once Spark completed a batch",
        "blobstate.worker:stage_snapshot": "a snapshot job's, after the listener asked",
        "blobstate.worker:restore_partition": "a copy that cannot be reused (a first batch restores nothing)",
        f"{driver}.standbys:WarmStandbys.request": "standby=1's, on a cluster of two hosts or more",
        f"{placement_at}:Placement.assign_standbys": "standby=1's warm job",
        f"{placement_at}:choose_standbys": "standby=1's warm job",
        f"{driver}.standbys:run_warm_job": "standby=1's warm job, on a SparkContext",
        "blobstate.spark.partitioned.executor.warm_task:warm_partition": "a warm job's task, on a standby's host",
        f"{driver}.standbys:record_reports": "standby=1's warm job",
        "blobstate.model.records:Replica": "standby=1's record metadata",
        f"{driver}.handover:HandOvers.on_leaving": "a decommission's, heard on a cluster with the switch on",
        "blobstate.spark.placement.decommission:hand_over": "a decommission's hand-over",
        f"{placement_at}:SparkPlacement.live_executors": "on a SparkContext with the JVM helper",
        "blobstate.spark.placement.decommission:leaving": "on a SparkContext with the JVM helper",
        "blobstate.spark.placement.decommission:enabled": "PartitionedState.open's, on a SparkContext",
        "blobstate.model.local_copy:first_batch_to_apply": "a later batch's, on a copy with a marker",
    })
    assert walk.plugin_paths[("plugins.fsspec_store", "put")] == {  # the tasks' changelogs, compressed
        ("spark", "worker", "codec", "repository.retry", "plugins.fsspec_store")}
    assert ("commit", "plugins.file_log", "repository.retry", "plugins.fsspec_store") in \
        walk.plugin_paths[("plugins.fsspec_store", "put_exclusive")]  # the group record (the other: the marker)


def test_the_room_check_sees_a_call_come_back_to_a_room():
    def module(name: str, body: str) -> dict:
        namespace = {"__name__": name, "sys": sys}
        exec(body, namespace)  # noqa: S102 - three one-line functions standing in for modules of three rooms
        return namespace

    inner = module("blobstate.commit.cleanup", "def f():\n    return sys._getframe()\n")
    middle = module("blobstate.model.layout", "def f(g):\n    return g()\n")
    outer = module("blobstate.repository.repo", "def f(m, g):\n    return m(g)\n")
    top = module("blobstate.commit.engine", "def f(o, m, g):\n    return o(m, g)\n")
    frame = top["f"](outer["f"], middle["f"], inner["f"])
    assert rooms_on_stack(frame)[-3:] == ["commit", "repository", "commit"]  # the model in between does not count


def test_a_stateful_processor_batch_follows_its_walkthrough_call_by_call(tmp_path, monkeypatch):
    """At the core level, as the partitioned batch above: the batch's times read from its offsets metadata, each
    partition's ``mapInArrow`` function called in-process on the batch's Arrow rows (what Spark's tasks run, without
    a JVM: the task's partition index given), the driver's acceptance and group commit, then the kept rows released;
    the steps only Spark reaches are named below."""
    import pyarrow as pa

    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.group import GroupCommitter
    from blobstate.model.records import StoreKey
    from blobstate.repository.repo import Repository
    from blobstate.spark.partitioned.driver.state import accept
    from blobstate.spark.partitioned.executor.batch_task import BatchPlan
    from blobstate.spark.processor import ProcessorSpec
    from blobstate.spark.stateful.driver.on_partitions import Kept, release
    from blobstate.spark.stateful.driver.restart import refuse_incompatible
    from blobstate.spark.stateful.driver.times import read_batch_times
    from blobstate.spark.stateful.executor import task as stateful
    from tests.processors import running_count

    class Offsets:  # Spark's offsets/N as the checkpoint location reads it (Spark wrote it before the batch ran)
        location = str(tmp_path / "ck")

        def offset_metadata(self, batch_id: int) -> dict:
            return {"batchTimestampMs": 1_700_000_000_000, "batchWatermarkMs": 0, "conf": {}}

    key, repo, parts = StoreKey("clicks", "counts", "per-user"), str(tmp_path / "repo"), 2
    rows = {0: pa.table({"k": ["ann", "ann", "bob"], "v": [1, 2, 3]}), 1: pa.table({"k": ["cid"], "v": [4]})}
    spec = ProcessorSpec(("k",), running_count.OUTPUT, query_id="q-1")
    with _Walk() as walk, Repository.open(repo) as repository:
        refuse_incompatible(running_count.RunningCount(), time_mode=spec.time_mode, repo=repo, job=key.job,
                            store=key.store, partitioned=True, task=key.task)  # before the query starts
        times = read_batch_times(Offsets(), 0, spec.time_mode)
        job = stateful.TaskJob(running_count.RunningCount(), spec, times)
        committer = StoreCommitter(key, repository, store_type="rocksdb", work_dir=str(tmp_path / "driver"))
        groups = GroupCommitter(committer, num_partitions=parts)
        plan = BatchPlan(repo, key, str(tmp_path / "executors"), parts, 0, committer.commit_point.generation(),
                         None, {p: () for p in range(parts)}, "q-1", ttl_ms=3_600_000)
        out: list = []
        for p in range(parts):
            monkeypatch.setattr(stateful, "task_partition", lambda p=p: p)  # Spark's TaskContext.partitionId()
            out += list(stateful.stateful_task(plan, job, iter(rows[p].to_batches())))
        task_rows = pa.Table.from_batches(out)
        prepares = [pickle.loads(v) for v in task_rows.column(stateful.PREPARE).to_pylist() if v is not None]
        accepted = accept(prepares, plan)
        group = groups.commit([p.entry for p in accepted], batch_id=0, query_id="q-1",
                              created_ms=min(p.created_ms for p in accepted))
        release(Kept())  # the output went to the sink: the kept rows (Spark's blocks) are dropped
        committer.close()
    assert group.generation == 1 and len(group.partitions) == parts
    output = task_rows.filter(pa.compute.is_null(task_rows.column(stateful.PREPARE))).drop_columns(stateful.PREPARE)
    assert sorted(output.to_pylist(), key=lambda r: r["k"]) == [{"k": "ann", "count": 2}, {"k": "bob", "count": 1},
                                                                {"k": "cid", "count": 1}]
    driver = "blobstate.spark.stateful.driver"
    follows(walk, "A stateful processor batch, step by step", {
        f"{driver}.entry:transform_with_state": "starts the query on a Spark session",
        f"{driver}.inputs:watermarked": "Spark's watermark on the stream, a Spark call",
        f"{driver}.on_partitions:PartitionedRun": "Spark calls it with the batch's DataFrame",
        f"{driver}.on_partitions:stateful_job": "the Spark job; here each task is called in-process",
        f"{driver}.on_partitions:placed_rows": "the Spark job's rows placed through the JVM helper, on Spark",
        "blobstate.spark.placement.coordinator:SparkPlacement.place": "the JVM helper's PlacedRDD, on Spark",
        f"{driver}.on_driver:DriverRun": "the driver's store (a processor without num_partitions), on Spark",
        "blobstate.spark.binding.engine:BatchEngine.run_batch": "the driver binding's engine, on Spark",
    })
    assert walk.plugin_paths[("plugins.fsspec_store", "put")] == {  # the tasks' changelogs, compressed
        ("spark", "worker", "codec", "repository.retry", "plugins.fsspec_store")}
