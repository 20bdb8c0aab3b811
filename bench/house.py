"""The house rule "a unit test beside every module of pure logic" (issue 40), counted: which modules have a
``tests/unit/<room>/test_<module>.py`` beside them, and the list of the modules of pure logic without one.

``python -m bench.house [--root DIR] [--json] [--all]``

- **Modules**: every ``*.py`` of the four packages (``core/`` = ``blobstate``, ``plugins/``, ``journal/``,
  ``spark/``) but ``__init__.py`` and ``__main__.py``, the conformance kits and simulator (``core/testing/``: test
  code themselves) and the demo program (``spark/demo/``).
- **Beside it**: the module's path mirrored under ``tests/unit``: ``core/<room>/<m>.py`` ->
  ``tests/unit/<room>/test_<m>.py`` (``core/<m>.py`` -> ``tests/unit/test_<m>.py``), ``plugins/kafka/<m>.py`` ->
  ``tests/unit/plugins/kafka/test_<m>.py``, ``journal/<m>.py`` -> ``tests/unit/journal/test_<m>.py``,
  ``spark/<m>.py`` -> ``tests/unit/spark/test_<m>.py`` (a room of ``spark/`` as a folder of its own).
- **Pure logic**: what a unit test can drive without a server, a subprocess or a Spark session (the rule
  ``tests/unit/conftest.py`` enforces; real files under ``tmp_path``, a ``file://`` repository and real RocksDB are
  fine). Every module is, but those ``NOT_PURE`` names, each with the reason and where it is tested instead, and
  those ``NO_LOGIC`` names (a protocol and its no-op: nothing to break).

``house(root)`` is the function a test calls; ``--root`` counts another checkout (``/work/main`` for the count
before a change). Nothing is imported: the tree is read as files.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: package folder -> the room prefix its modules' tests live under (``core``'s rooms are its own folders)
PACKAGES = {"core": "", "plugins": "plugins", "journal": "journal", "spark": "spark"}
#: folders whose modules are not counted at all: test code, and a demo program
SKIPPED = ("core/testing/*", "spark/demo/*")

_SERVERS = "tests/contract and tests/e2e against the real server"
#: module (a path or an ``fnmatch`` pattern) -> why it is not pure logic, and where it is tested
NOT_PURE: dict[str, str] = {
    "core/cli/main_*.py": "a command: its options, one API call and its output; run through the CLI (tests/e2e)",
    "core/api.py": "the verbs: each opens a repository and runs a pipeline end to end (tests/e2e, tests/fault)",
    "plugins/s3_store.py": f"the S3 backend: {_SERVERS} (moto)",
    "plugins/gcs_store.py": f"the GCS backend: {_SERVERS} (the GCS emulator)",
    "plugins/azure_store.py": f"the Azure backend: {_SERVERS} (azurite)",
    "plugins/sql_log.py": f"the SQL log: {_SERVERS} (SQLite and PostgreSQL)",
    "plugins/kafka/admin.py": f"the Kafka topic admin: {_SERVERS} (Kafka)",
    "plugins/kafka/client.py": f"kafka-python's clients: {_SERVERS} (Kafka)",
    "plugins/kafka/log.py": f"the Kafka log: {_SERVERS} (Kafka)",
    "spark/binding/lifecycle.py": "a query's lifecycle on a Spark session (tests/e2e, local Spark)",
    "spark/binding/engine.py": "foreachBatch's side of the binding, on a Spark session (tests/e2e, local Spark)",
    "spark/placement/helper_jar.py": "builds and loads the JVM helper with javac and py4j (tests/e2e)",
    "spark/partitioned/driver/state.py": "partitioned state on a Spark session (tests/e2e, local Spark)",
    "spark/data/rescale.py": "an offline Spark job (tests/e2e, local Spark)",
    "spark/data/read.py": "state as a Spark DataFrame (tests/e2e, local Spark)",
    "spark/data/write.py": "a DataFrame written as state (tests/e2e, local Spark)",
    "spark/partitioned/driver/routing.py": "Spark expressions and a route query on a Spark session "
                                           "(tests/e2e/test_spark_keygroups.py, local Spark)",
}
#: module -> why it has no logic of its own to test
NO_LOGIC: dict[str, str] = {
    "core/model/progress.py": "the Progress protocol and NoProgress, whose three methods do nothing",
    **{f"core/plugin/{m}.py": f"an alias of blobstate.plugins.toolkit.{m}, kept for third-party plugins"
       for m in ("local_files", "native_ttl", "transfer")},
    **{f"core/repository/{m}.py": f"an alias of blobstate.config.{m}, kept for third-party plugins"
       for m in ("options", "settings")},
}


@dataclass
class House:
    """The count over one checkout: every module (relative path) with its test file, and which are pure."""

    modules: dict[str, str] = field(default_factory=dict)  # module -> the test file beside it (relative)
    tested: set[str] = field(default_factory=set)  # modules whose test file exists
    not_pure: dict[str, str] = field(default_factory=dict)  # module -> why
    no_logic: dict[str, str] = field(default_factory=dict)  # module -> why

    @property
    def pure(self) -> list[str]:
        return sorted(m for m in self.modules if m not in self.not_pure and m not in self.no_logic)

    @property
    def missing(self) -> list[str]:
        """The modules of pure logic without a test beside them."""
        return [m for m in self.pure if m not in self.tested]

    def summary(self) -> dict:
        pure = self.pure
        return {"modules": len(self.modules), "modules_with_a_test": len(self.tested), "pure": len(pure),
                "pure_with_a_test": len(pure) - len(self.missing), "missing": self.missing}


def beside(module: str) -> str:
    """The ``tests/unit/...`` file beside ``module`` (a path relative to the checkout: ``core/codec/log.py``)."""
    folder, _, rest = module.partition("/")
    parts = [p for p in (PACKAGES[folder], *rest.split("/")[:-1]) if p]
    return "/".join(["tests", "unit", *parts, f"test_{Path(module).name}"])


def _matches(module: str, table: dict[str, str]) -> str | None:
    return next((why for pattern, why in table.items() if fnmatch.fnmatchcase(module, pattern)), None)


def house(root: Path | str = ROOT) -> House:
    """Count the checkout at ``root`` (see the module docstring)."""
    root = Path(root)
    result = House()
    for folder in PACKAGES:
        for path in sorted((root / folder).rglob("*.py")):
            module = path.relative_to(root).as_posix()
            if path.name in ("__init__.py", "__main__.py") or any(fnmatch.fnmatchcase(module, p) for p in SKIPPED):
                continue
            result.modules[module] = beside(module)
            if (root / result.modules[module]).is_file():
                result.tested.add(module)
            if (why := _matches(module, NOT_PURE)) is not None:
                result.not_pure[module] = why
            elif (why := _matches(module, NO_LOGIC)) is not None:
                result.no_logic[module] = why
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.house", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(ROOT), help="the checkout to count (default: this one)")
    parser.add_argument("--json", action="store_true", help="print the counts and the lists as JSON")
    parser.add_argument("--all", action="store_true", help="also list the modules that are not pure logic, and why")
    args = parser.parse_args(argv)
    counted = house(args.root)
    summary = counted.summary()
    if args.json:
        print(json.dumps({**summary, "not_pure": counted.not_pure, "no_logic": counted.no_logic}, indent=2))
        return 0
    print(f"{summary['modules']} modules, {summary['modules_with_a_test']} with a test beside them; "
          f"{summary['pure']} of pure logic, {summary['pure_with_a_test']} of them with a test beside them")
    if counted.missing:
        print(f"\nmodules of pure logic without a test beside them ({len(counted.missing)}):")
        for module in counted.missing:
            print(f"  {module}  (expects {counted.modules[module]})")
    if args.all:
        print(f"\nnot pure logic ({len(counted.not_pure)}), or no logic ({len(counted.no_logic)}):")
        for module, why in sorted({**counted.not_pure, **counted.no_logic}.items()):
            print(f"  {module}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
