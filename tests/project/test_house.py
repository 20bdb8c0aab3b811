"""``bench/house.py``, the count behind "a unit test beside every module of pure logic" (issue 40): where a module's
test lives, what it counts on a tree made here, and that its lists of exceptions name modules that exist (a module
moved or removed must take its exception with it)."""

from __future__ import annotations

import fnmatch
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench import house as h  # noqa: E402


def test_a_modules_test_mirrors_its_path_under_tests_unit():
    assert h.beside("core/codec/log.py") == "tests/unit/codec/test_log.py"
    assert h.beside("core/errors.py") == "tests/unit/test_errors.py"
    assert h.beside("plugins/kafka/config.py") == "tests/unit/plugins/kafka/test_config.py"
    assert h.beside("journal/file.py") == "tests/unit/journal/test_file.py"
    assert h.beside("spark/driver/binding.py") == "tests/unit/spark/driver/test_binding.py"


def test_the_count_of_a_tree(tmp_path):
    for module in ("core/__init__.py", "core/codec/log.py", "core/codec/store.py", "core/cli/main_ls.py",
                   "core/testing/kit.py", "core/model/progress.py", "spark/demo/run.py", "spark/scheduler.py",
                   "plugins/__main__.py", "tests/unit/codec/test_log.py", "tests/unit/spark/test_scheduler.py",
                   "tests/unit/cli/test_main_ls.py"):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    counted = h.house(tmp_path)
    assert sorted(counted.modules) == ["core/cli/main_ls.py", "core/codec/log.py", "core/codec/store.py",
                                       "core/model/progress.py", "spark/scheduler.py"]
    assert counted.summary() == {"modules": 5, "modules_with_a_test": 3, "pure": 3, "pure_with_a_test": 2,
                                 "missing": ["core/codec/store.py"]}
    assert set(counted.not_pure) == {"core/cli/main_ls.py"} and set(counted.no_logic) == {"core/model/progress.py"}


def test_every_exception_names_a_module_that_exists():
    modules = list(h.house().modules)
    stale = [pattern for pattern in {**h.NOT_PURE, **h.NO_LOGIC}
             if not any(fnmatch.fnmatchcase(m, pattern) for m in modules)]
    assert not stale, f"bench/house.py names modules that are gone (move or drop their entries): {stale}"


def test_the_command_prints_the_count_and_the_list(capsys):
    assert h.main([]) == 0
    out = capsys.readouterr().out
    counted = h.house()
    assert out.startswith(f"{len(counted.modules)} modules, {len(counted.tested)} with a test beside them")
    assert all(m in out for m in counted.missing)
