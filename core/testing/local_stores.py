"""The ``LocalStore`` conformance suite: pytest tests a plugin author runs against their own local store type.

Usage (in the plugin's tests; needs pytest, the ``test`` extra)::

    from blobstate.testing.local_stores import LocalStoreContract, StoreHarness

    class SqliteHarness(StoreHarness):
        store_type = "sqlite"
        def open(self, directory): ...          # open or create a store in ``directory``; return the source
        def write(self, source, items): ...     # durably write {key: value} into the live store
        def read(self, directory): ...          # {key: value} of a copy (checkpoint, restored dir), read-only

    class TestSqliteStore(LocalStoreContract):
        def create_harness(self):
            return SqliteHarness()

``create_harness()`` is the kit's one abstract factory (the shape of every kit in ``blobstate.testing``, like
eventsourcing's ``create_recorder()``); ``self.tmp_path`` and ``self.request`` (pytest's request) are set before it
is called.

What the suite checks (the contract in ``blobstate.plugin.interfaces.LocalStore``):

- the plugin is registered: ``open_local_store(store_type)`` gives it, ``detect`` (if any) recognises a store;
- a checkpoint is a consistent, point-in-time copy: later writes to the live store change neither its content
  nor any of its files' bytes (immutable files may be hard links; a file that changes in place may not);
- the target directory must not exist: an existing one raises and is left as it was; a failed checkpoint
  leaves no target behind;
- mutability is honest: a file reported immutable never changes content under the same name between two
  checkpoints, and ``is_mutable`` depends on the name alone;
- restore validation: ``validate`` accepts a checkpoint and a copy of it, and rejects a damaged copy with
  ``IntegrityError`` (unless the harness says the store cannot tell, ``detects_corruption = False``);
- end to end: backup and restore through ``blobstate.api`` into a fresh directory and over the same work
  directory give back exactly the state, for the latest and for an older checkpoint.
"""

from __future__ import annotations

import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from blobstate.errors import IntegrityError
from blobstate.plugin.interfaces import LocalStore
from blobstate.testing.kit import ContractKit

__all__ = ["LocalStoreContract", "StoreHarness", "file_bytes"]


class StoreHarness(ABC):
    """How the suite drives one kind of local store. Values are short strings; keys are unique strings."""

    #: The store type the plugin registers (``LocalStoreSpec.store_type``).
    store_type: str = ""
    #: False when the store's ``validate`` cannot notice damaged file contents (e.g. a plain directory).
    detects_corruption: bool = True

    @abstractmethod
    def open(self, directory: str) -> object:
        """Open the store in ``directory``, creating it (and ``directory``) when missing; return the ``source``
        that ``LocalStore.create_checkpoint`` takes (a path or a live handle)."""

    @abstractmethod
    def write(self, source: object, items: Mapping[str, str]) -> None:
        """Insert or overwrite ``items`` in the live store, durably (a checkpoint taken next must see them)."""

    @abstractmethod
    def read(self, directory: str) -> dict[str, str]:
        """Every key and value of the store copy in ``directory`` (a checkpoint or a restored directory),
        without modifying any file in it."""

    def close(self, source: object) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Release the live store returned by ``open``."""


def file_bytes(directory: str) -> dict[str, bytes]:
    """``{relative path with '/': content}`` of every regular file under ``directory`` (symlinks skipped)."""
    out: dict[str, bytes] = {}
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[path.relative_to(directory).as_posix()] = path.read_bytes()
    return out


def _batch(prefix: str, n: int) -> dict[str, str]:
    return {f"{prefix}-{i:04d}": f"value-{prefix}-{i}" * 3 for i in range(n)}


class LocalStoreContract(ContractKit):
    """Subclass as ``Test...`` and implement ``create_harness()`` (override the ``local_store`` fixture to pass the
    store options)."""


    @abstractmethod
    def create_harness(self) -> StoreHarness:
        """The ``StoreHarness`` that drives your local store type."""

    @pytest.fixture
    def harness(self, _kit: None) -> StoreHarness:
        return self.create_harness()

    @pytest.fixture
    def local_store(self, harness: StoreHarness) -> LocalStore:
        from blobstate.repository.backends import open_local_store

        return open_local_store(harness.store_type)

    @pytest.fixture
    def live(self, harness: StoreHarness, tmp_path: Path) -> Iterator[tuple[str, object]]:
        """``(store directory, source)`` of a fresh live store with a first batch of data."""
        directory = str(tmp_path / "live")
        source = harness.open(directory)
        harness.write(source, _batch("a", 50))
        try:
            yield directory, source
        finally:
            harness.close(source)

    # -- registration -----------------------------------------------------------------------------------------
    def test_registered_under_its_store_type(self, harness: StoreHarness, local_store: LocalStore,
                                             live: tuple[str, object]) -> None:
        from blobstate.plugin.manager import get_plugin_manager
        from blobstate.plugin.records import LocalStoreSpec, resolve_factory
        from blobstate.repository.backends import detect_store_type

        assert harness.store_type, "the harness must name its store type"
        assert isinstance(local_store, LocalStore)
        assert local_store.store_type == harness.store_type
        spec = get_plugin_manager().select(LocalStoreSpec, harness.store_type).spec
        assert isinstance(spec, LocalStoreSpec)
        if spec.detect is not None:
            detect = resolve_factory(spec.detect, what=f"local store {spec.name!r}")
            assert detect(live[0]) is True, "detect() must recognise a store the harness created"
            assert detect_store_type(live[0]) == harness.store_type

    # -- checkpoints ------------------------------------------------------------------------------------------
    def test_checkpoint_holds_the_state(self, harness: StoreHarness, local_store: LocalStore,
                                        live: tuple[str, object], tmp_path: Path) -> None:
        harness.write(live[1], {"a-0001": "overwritten", "b": "new"})
        expected = {**_batch("a", 50), "a-0001": "overwritten", "b": "new"}
        target = str(tmp_path / "cp")
        local_store.create_checkpoint(live[1], target)
        assert os.path.isdir(target)
        assert harness.read(target) == expected

    def test_checkpoint_is_point_in_time_and_independent(self, harness: StoreHarness, local_store: LocalStore,
                                                         live: tuple[str, object], tmp_path: Path) -> None:
        source = live[1]
        target = str(tmp_path / "cp")
        local_store.create_checkpoint(source, target)
        before = file_bytes(target)
        assert before, "a checkpoint of a store with data holds files"
        harness.write(source, {**_batch("c", 200), "a-0000": "changed"})
        assert harness.read(target) == _batch("a", 50)
        assert file_bytes(target) == before, "writes to the live store changed the checkpoint's files"

    def test_target_must_not_exist(self, local_store: LocalStore, live: tuple[str, object],
                                   tmp_path: Path) -> None:
        target = tmp_path / "cp"
        target.mkdir()
        (target / "keep.txt").write_bytes(b"precious")
        with pytest.raises(Exception):  # noqa: B017 - any error; FileExistsError is the natural one
            local_store.create_checkpoint(live[1], str(target))
        assert file_bytes(str(target)) == {"keep.txt": b"precious"}, "an existing target was modified"

    def test_failed_checkpoint_leaves_no_target(self, local_store: LocalStore, tmp_path: Path) -> None:
        target = tmp_path / "cp"
        with pytest.raises(Exception):  # noqa: B017 - the kind of error is the plugin's choice
            local_store.create_checkpoint(str(tmp_path / "no-such-store"), str(target))
        assert not target.exists()

    # -- mutability -------------------------------------------------------------------------------------------
    def test_immutable_files_never_change(self, harness: StoreHarness, local_store: LocalStore,
                                          live: tuple[str, object], tmp_path: Path) -> None:
        source = live[1]
        local_store.create_checkpoint(source, str(tmp_path / "cp1"))
        for round_no in range(3):
            harness.write(source, {**_batch(f"r{round_no}", 100), "a-0002": f"round {round_no}"})
        local_store.create_checkpoint(source, str(tmp_path / "cp2"))
        one, two = file_bytes(str(tmp_path / "cp1")), file_bytes(str(tmp_path / "cp2"))
        assert one != two, "the harness's writes did not change the checkpoint at all"
        for rel in sorted(set(one) & set(two)):
            mutable = local_store.is_mutable(rel)
            assert isinstance(mutable, bool)
            assert local_store.is_mutable(rel) is mutable, "is_mutable must depend on the name alone"
            if not mutable:
                assert one[rel] == two[rel], f"{rel} is reported immutable but its content changed"

    # -- restore validation -----------------------------------------------------------------------------------
    def test_validate_accepts_a_checkpoint_and_its_copy(self, harness: StoreHarness, local_store: LocalStore,
                                                        live: tuple[str, object], tmp_path: Path) -> None:
        target = str(tmp_path / "cp")
        local_store.create_checkpoint(live[1], target)
        local_store.validate(target)
        copy = str(tmp_path / "restored")
        shutil.copytree(target, copy)
        local_store.validate(copy)
        assert harness.read(copy) == _batch("a", 50)

    def test_validate_rejects_damaged_files(self, harness: StoreHarness, local_store: LocalStore,
                                            live: tuple[str, object], tmp_path: Path) -> None:
        if not harness.detects_corruption:
            pytest.skip(f"{harness.store_type}: validate() cannot tell damaged contents (harness says so)")
        target = tmp_path / "cp"
        local_store.create_checkpoint(live[1], str(target))
        for rel in file_bytes(str(target)):
            path = target / rel
            path.write_bytes(b"\xa5" * max(4096, path.stat().st_size))
        with pytest.raises(IntegrityError):
            local_store.validate(str(target))

    # -- end to end -------------------------------------------------------------------------------------------
    def test_backup_and_restore_through_blobstate(self, harness: StoreHarness, local_store: LocalStore,
                                                  live: tuple[str, object], tmp_path: Path) -> None:
        from blobstate import api

        directory, source = live
        repo = str(tmp_path / "repo")
        work = str(tmp_path / "work")
        common = {"repo": repo, "job": "conformance", "store": "s", "store_type": harness.store_type}
        first = api.backup(directory, source=source, work_dir=work, **common)
        harness.write(source, {**_batch("d", 20), "a-0003": "second"})
        second = api.backup(directory, source=source, work_dir=work, **common)
        assert second.checkpoint.checkpoint_id != first.checkpoint.checkpoint_id
        latest = {**_batch("a", 50), **_batch("d", 20), "a-0003": "second"}

        fresh = str(tmp_path / "fresh")  # a new host: everything downloaded
        result = api.restore(fresh, work_dir=str(tmp_path / "work2"), **common)
        assert result.checkpoint.checkpoint_id == second.checkpoint.checkpoint_id
        assert harness.read(fresh) == latest

        same_host = str(tmp_path / "same-host")  # this host: files may come from local checkpoints
        api.restore(same_host, work_dir=work, **common)
        assert harness.read(same_host) == latest
        for rel in file_bytes(same_host):
            if local_store.is_mutable(rel):
                assert os.stat(os.path.join(same_host, *rel.split("/"))).st_nlink == 1, (
                    f"restored mutable file {rel} shares its inode with another file"
                )

        older = str(tmp_path / "older")
        api.restore(older, work_dir=str(tmp_path / "work3"), checkpoint=first.checkpoint.checkpoint_id,
                    **common)
        assert harness.read(older) == _batch("a", 50)
