"""The public API as a type checker and a packager see it: `py.typed` in the wheel, real signatures for the lazy
`blobstate.backup` & co. (mypy, in a subprocess), no `**kwargs` hiding options, every verb in `dir(blobstate)`,
one naming scheme (no legacy keyword aliases; ``recover`` names its store like every verb), ``blobstate.__all__``
matching ``blobstate.api.__all__``, ``Repository`` a context manager; the LICENSE, classifiers and project URLs in
the metadata."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import blobstate
from blobstate import api

# One wheel build (the module fixture) serves the tests here: on one pytest-xdist worker, it is built once.
pytestmark = pytest.mark.xdist_group("api-wheel")

ROOT = Path(__file__).resolve().parents[2]
VERBS = ["backup", "restore", "list_stores", "list_checkpoints", "describe_checkpoints", "ls", "diff", "stats",
         "verify", "gc", "init", "lifecycle_rule", "journal_events", "unfinished_commits", "recover", "recover_all",
         "preview_backup"]


@pytest.mark.parametrize("name", VERBS)
def test_every_verb_has_an_explicit_typed_signature(name):
    fn = getattr(api, name)
    signature = inspect.signature(fn)
    assert not [p for p in signature.parameters.values() if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)], name
    hints = inspect.get_annotations(fn)
    assert set(signature.parameters) <= set(hints) and "return" in hints, name
    assert fn.__doc__, name


def test_the_verbs_are_in_dir_and_resolve_to_the_api():
    for name in ("backup", "restore", "verify", "gc", "ls", "diff", "stats", "init", "describe_checkpoints"):
        assert name in dir(blobstate) and name in blobstate.__all__
        assert getattr(blobstate, name) is getattr(api, name)


LEGACY = {"backup": ["ttl_ms"], "restore": ["checkpoint_id"], "verify": ["key", "checkpoint_id"], "gc": ["ttl_ms"],
          "lifecycle_rule": ["ttl_ms"], "recover": ["key"]}


def test_one_naming_scheme_and_no_legacy_keywords(tmp_path, work_base):
    store = tmp_path / "counts"
    store.mkdir()
    (store / "a").write_bytes(b"a" * 10)
    repo = str(tmp_path / "repo")
    first = blobstate.backup(str(store), repo=repo, ttl="1d", chunk_size="1MiB", retain=2)
    second = blobstate.backup(str(store), repo=repo, ttl=3_600_000)  # an int is milliseconds
    for params in (["job", "task", "store", "checkpoint", "work_base"],):
        assert set(params) <= set(inspect.signature(api.restore).parameters)
    out = tmp_path / "out" / "counts"
    assert blobstate.restore(str(out), repo=repo, checkpoint="1").checkpoint == first.checkpoint
    assert blobstate.restore(str(out), repo=repo, checkpoint=second.checkpoint.checkpoint_id).checkpoint == \
        second.checkpoint
    by_names = api.list_checkpoints(repo=repo, store="counts")
    assert [cp.checkpoint_id for cp in by_names] == [first.checkpoint.checkpoint_id, second.checkpoint.checkpoint_id]
    assert api.verify(repo=repo)[0].ok
    for verb, names in LEGACY.items():
        assert not set(names) & set(inspect.signature(getattr(api, verb)).parameters), verb
    with pytest.raises(TypeError, match="ttl_ms"):
        blobstate.backup(str(store), repo=repo, ttl_ms=3_600_000)  # type: ignore[call-arg]


def test_the_package_exports_exactly_what_the_api_exports():
    assert set(api.__all__) <= set(blobstate.__all__), set(api.__all__) - set(blobstate.__all__)
    assert len(blobstate.__all__) == len(set(blobstate.__all__))
    assert all(getattr(blobstate, name) is not None for name in blobstate.__all__)
    for name in api.__all__:
        assert getattr(blobstate, name) is getattr(api, name), name
        assert name in dir(blobstate), name


def test_recover_names_its_store_like_every_verb(tmp_path, work_base):
    params = inspect.signature(api.recover).parameters
    assert {"job", "task", "store"} <= set(params) and "key" not in params
    store = tmp_path / "counts"
    store.mkdir()
    (store / "a").write_bytes(b"a")
    repo = str(tmp_path / "repo")
    blobstate.backup(str(store), repo=repo)
    assert blobstate.recover(repo=repo, job="default", task="0", store="counts") == []  # nothing left open
    with pytest.raises(TypeError, match="store="):
        blobstate.recover(repo=repo)


def test_a_repository_is_a_context_manager(tmp_path, monkeypatch):
    repo = str(tmp_path / "repo")
    blobstate.init(repo=repo)
    closed = []
    real_close = api.Repository.close
    monkeypatch.setattr(api.Repository, "close", lambda self: closed.append(self) or real_close(self))
    with api.Repository.open(repo) as repository:
        assert repository.info is not None
    assert closed == [repository]
    with pytest.raises(RuntimeError), api.Repository.open(repo) as again:
        raise RuntimeError("inside")
    assert closed == [repository, again]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """blobstate's wheel, built from this checkout (without build isolation: offline)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(out), str(ROOT)], check=True, timeout=600, capture_output=True)
    return next(out.glob("blobstate-*.whl"))


def test_mypy_sees_the_real_types(tmp_path, wheel):
    """What a user's type checker sees from the installed wheel (PEP 561: py.typed)."""
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, timeout=600, capture_output=True)
    sample = tmp_path / "use_blobstate.py"
    sample.write_text(
        "import blobstate\n"
        "reveal_type(blobstate.backup)\n"
        "result = blobstate.backup('/data/counts', repo='file:///backups', ttl='1d')\n"
        "reveal_type(result.checkpoint.generation)\n"
        "blobstate.backup('/data/counts', repo='file:///backups', no_such_option=1)\n"
        "blobstate.restore('/data/counts', repo='file:///backups', checkpoint=3)\n"
    )
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
                          "--ignore-missing-imports", "--no-error-summary", str(sample)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "MYPYPATH": str(site)})
    lines = run.stdout.splitlines()
    revealed = [line for line in lines if "Revealed type" in line]
    assert len(revealed) == 2, run.stdout + run.stderr
    assert "def (source_dir: str, *, repo: str" in revealed[0] and "BackupResult" in revealed[0]
    assert "builtins.object" not in revealed[0]
    assert revealed[1].endswith('"int"') or revealed[1].endswith('"builtins.int"'), revealed[1]
    errors = [line for line in lines if ": error:" in line]
    assert len(errors) == 1 and 'Unexpected keyword argument "no_such_option"' in errors[0], run.stdout


def test_the_wheel_has_py_typed_the_license_and_the_metadata(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "blobstate/py.typed" in names
    assert any(n.endswith("licenses/LICENSE") for n in names), names
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    assert "Classifier: Topic :: System :: Archiving :: Backup" in metadata
    assert "Project-URL: Source," in metadata
    assert "Provides-Extra: testing" in metadata
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in license_text
