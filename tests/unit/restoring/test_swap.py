"""``blobstate.restoring.swap`` on real directories: a staging directory is recognised by its sentinel only; a swap
puts the new tree in place all or nothing (a failing step undoes the ones done); after a crash at any rename the
next restore finds the old tree again, or keeps the new one once ``swap.done`` says every step completed; links move
as links; restored attributes never carry set-user-ID or set-group-ID."""

from __future__ import annotations

import json
import os
import stat

import pytest
from unprivileged import run_unprivileged

from blobstate.restoring import swap as s
from blobstate.restoring.swap import Staging, SwapStep


def tree(root) -> dict[str, str]:
    """``{relative path: content, 'dir', or '-> target'}`` of everything under ``root`` (staging left out)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(s.PREFIX)]
        rel_dir = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            out[rel] = f"-> {os.readlink(path)}" if os.path.islink(path) else "dir" if os.path.isdir(path) else \
                open(path).read()
    return out


def write(root, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if content == "dir":
            os.makedirs(path, exist_ok=True)
        elif content.startswith("-> "):
            os.symlink(content[3:], path)
        else:
            with open(path, "w") as fh:
                fh.write(content)


OLD = {"keep.sst": "same", "changed.sst": "old", "gone.sst": "old", "was-file": "file", "link": "-> keep.sst"}
NEW_SLOTS = {"changed.sst": "new", "added.sst": "new", "was-file/inner": "now a dir", "link": "-> changed.sst"}
STEPS = [SwapStep("added.sst", False, True), SwapStep("changed.sst", True, True), SwapStep("gone.sst", True, False),
         SwapStep("link", True, True), SwapStep("was-file", True, True)]
NEW = {"keep.sst": "same", "changed.sst": "new", "added.sst": "new", "was-file": "dir", "was-file/inner": "now a dir",
       "link": "-> changed.sst"}


@pytest.fixture
def staged(tmp_path):
    dest = str(tmp_path / "dest")
    write(dest, OLD)
    staging = Staging.create(dest, avoid=set())
    write(staging.new, NEW_SLOTS)
    return dest, staging


def test_join_rel():
    assert s.join_rel("/r", "") == "/r" and s.join_rel("/r", "a/b/c") == os.path.join("/r", "a", "b", "c")


def test_a_staging_directory_is_made_inside_the_destination_with_its_sentinel(tmp_path):
    dest = str(tmp_path)
    staging = Staging.create(dest, avoid=set())
    assert staging.name.startswith(s.PREFIX) and len(staging.name) == len(s.PREFIX) + 16
    assert os.path.dirname(staging.root) == dest
    with open(os.path.join(staging.root, s.SENTINEL)) as fh:
        assert json.load(fh) == {"destination": dest, "name": staging.name}
    for d in (staging.root, staging.new, staging.old):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert s.staging_names(dest) == [staging.name] and s.is_staging(dest, staging.name)


def test_a_staging_name_avoids_the_snapshots_names_and_what_exists(tmp_path, monkeypatch):
    hexes = iter(["a" * 32, "b" * 32, "c" * 32])
    monkeypatch.setattr(s.uuid, "uuid4", lambda: type("U", (), {"hex": next(hexes)})())
    (tmp_path / f"{s.PREFIX}{'b' * 16}").write_text("taken")
    staging = Staging.create(str(tmp_path), avoid={f"{s.PREFIX}{'a' * 16}"})
    assert staging.name == f"{s.PREFIX}{'c' * 16}"


@pytest.mark.parametrize("spoil", [
    lambda root, dest: os.unlink(os.path.join(root, s.SENTINEL)),
    lambda root, dest: open(os.path.join(root, s.SENTINEL), "w").write("{not json"),
    lambda root, dest: open(os.path.join(root, s.SENTINEL), "w").write('["a list"]'),
    lambda root, dest: open(os.path.join(root, s.SENTINEL), "w").write(
        json.dumps({"destination": "/elsewhere", "name": os.path.basename(root)})),
    lambda root, dest: open(os.path.join(root, s.SENTINEL), "w").write(
        json.dumps({"destination": dest, "name": "another"})),
], ids=["no sentinel", "malformed", "not an object", "another destination", "another name"])
def test_only_a_directory_whose_sentinel_names_it_is_a_staging_directory(tmp_path, spoil):
    dest = str(tmp_path)
    staging = Staging.create(dest, avoid=set())
    spoil(staging.root, dest)
    assert not s.is_staging(dest, staging.name) and s.staging_names(dest) == []
    assert s.recover_interrupted(dest) == [] and os.path.isdir(staging.root)  # never removed: not ours


def test_neither_a_link_to_one_a_file_nor_another_name_is_a_staging_directory(tmp_path):
    dest = str(tmp_path / "dest")
    os.mkdir(dest)
    staging = Staging.create(dest, avoid=set())
    os.symlink(staging.root, os.path.join(dest, s.PREFIX + "link"))
    (tmp_path / "dest" / (s.PREFIX + "file")).write_text("{}")
    os.rename(staging.root, os.path.join(dest, "renamed"))
    assert s.staging_names(dest) == []
    assert s.staging_names(str(tmp_path / "missing")) == []


def test_a_swap_puts_the_new_tree_in_place_and_keeps_what_it_displaced(staged):
    dest, staging = staged
    staging.swap(STEPS)
    assert tree(dest) == NEW
    assert tree(staging.old) == {"changed.sst": "old", "gone.sst": "old", "was-file": "file", "link": "-> keep.sst"}
    assert os.path.exists(os.path.join(staging.root, s.DONE))
    with open(os.path.join(staging.root, s.SWAP)) as fh:
        assert json.load(fh) == [[st.rel, st.had_old, st.has_new] for st in STEPS]
    staging.discard()
    assert tree(dest) == NEW and s.staging_names(dest) == [] and not os.path.exists(staging.root)


def test_a_step_that_fails_undoes_every_step_done_and_raises(staged):
    dest, staging = staged
    broken = [*STEPS[:3], SwapStep("no-such-slot", False, True), *STEPS[3:]]
    with pytest.raises(FileNotFoundError):
        staging.swap(broken)
    assert tree(dest) == OLD
    assert tree(staging.new) == NEW_SLOTS | {"was-file": "dir"}  # the new entries are back in their slots
    assert not os.path.exists(os.path.join(staging.root, s.SWAP))
    staging.rollback()  # idempotent
    assert tree(dest) == OLD


def renames(steps):
    """The renames a swap makes, in order, as ``(step, slot)``: ``old`` (dest -> old) then ``new`` (new -> dest)."""
    return [(st, slot) for st in steps for slot, done in (("old", st.had_old), ("new", st.has_new)) if done]


@pytest.mark.parametrize("done", range(len(renames(STEPS)) + 1))
def test_after_a_crash_at_any_rename_the_next_restore_finds_the_old_tree(staged, done):
    dest, staging = staged
    with open(os.path.join(staging.root, s.SWAP), "w") as fh:
        json.dump([[st.rel, st.had_old, st.has_new] for st in STEPS], fh)
    for step, slot in renames(STEPS)[:done]:  # what the swap did before the process died
        target = s.join_rel(dest, step.rel)
        if slot == "old":
            os.makedirs(os.path.dirname(s.join_rel(staging.old, step.rel)), exist_ok=True)
            os.rename(target, s.join_rel(staging.old, step.rel))
        else:
            os.rename(staging.new_path(step.rel), target)
    assert s.recover_interrupted(dest) == [staging.name]
    assert tree(dest) == OLD and not os.path.exists(staging.root)


def test_after_a_crash_once_every_step_completed_the_new_tree_is_kept(staged):
    dest, staging = staged
    staging.swap(STEPS)  # swap.done written; the process dies before discarding the staging directory
    assert s.recover_interrupted(dest) == [staging.name]
    assert tree(dest) == NEW and not os.path.exists(staging.root)


def test_a_staging_directory_without_a_swap_is_only_removed(staged):
    dest, staging = staged
    assert s.recover_interrupted(dest) == [staging.name]
    assert tree(dest) == OLD and not os.path.exists(staging.root)


def test_remove_tree_of_nothing_is_nothing(tmp_path):
    s.remove_tree(str(tmp_path / "missing"))


def restored_tree(base, mode: int) -> str:
    """A staging tree whose ``old/sub`` (a file and a directory with a file in it) has ``mode``, as a snapshot's
    directory is restored; ``old`` itself read-only."""
    root = base / "staging"
    (root / "old/sub/deeper").mkdir(parents=True)
    (root / "old/sub/f").write_text("x")
    (root / "old/sub/deeper/g").write_text("y")
    os.chmod(root / "old/sub", mode)
    os.chmod(root / "old", 0o555)
    return str(root)


@pytest.mark.parametrize("mode", [0o555, 0o500, 0o000, 0o100, 0o300, 0o400, 0o600], ids=oct)
def test_remove_tree_gets_past_a_restored_directory_it_may_not_read_write_or_search(mode):
    """As a user other than root (root passes every permission check): without read permission rmtree's onerror
    was retried as ``os.open(path)`` without flags (a TypeError); without search permission (0o400, 0o600) an entry
    that is a directory was unlinked as a file."""

    def case(base):
        root = restored_tree(base, mode)
        s.remove_tree(root)
        assert not os.path.exists(root)

    run_unprivileged(case)


def test_remove_tree_gets_past_a_directory_it_may_list_but_not_search_holding_only_a_directory():
    """rmtree cannot stat the entry it lists (onerror(os.lstat)): it was skipped, and the rmdir of its parent
    failed (a file listed first gave the search permission back and hid it)."""

    def case(base):
        root = base / "staging"
        (root / "sub/deeper").mkdir(parents=True)
        (root / "sub/deeper/g").write_text("y")
        os.chmod(root / "sub", 0o400)
        s.remove_tree(str(root))
        assert not os.path.exists(root)

    run_unprivileged(case)


def test_remove_tree_gets_past_its_own_root_without_permissions():
    def case(base):
        root = restored_tree(base, 0o000)
        os.chmod(root, 0o000)
        s.remove_tree(root)
        assert not os.path.exists(root)

    run_unprivileged(case)


def foreign(base, mode: int, file: bool = False) -> None:
    """``staging/theirs`` owned by root with ``mode`` (a file in it when ``file``), in a ``staging`` the unprivileged
    user owns."""
    theirs = base / "staging" / "theirs"
    theirs.mkdir(parents=True)
    if file:
        (theirs / "f").write_text("root's")
    os.chmod(theirs, mode)
    owner = os.stat(base)
    os.chown(base / "staging", owner.st_uid, owner.st_gid)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make what the unprivileged user does not own")
@pytest.mark.parametrize("mode, file", [(0o000, False), (0o1777, True)], ids=["unreadable", "sticky"])
def test_remove_tree_raises_where_no_permission_of_its_own_stands_in_the_way(mode, file):
    """A directory it does not own (chmod refused), or an entry a permission it may give back does not free (root's
    file in root's sticky directory): the error, never a loop."""

    def case(base):
        with pytest.raises(PermissionError):
            s.remove_tree(str(base / "staging"))
        assert os.path.exists(base / "staging" / "theirs")

    run_unprivileged(case, prepare=lambda base: foreign(base, mode, file))


@pytest.mark.parametrize("mode, kept", [(0o6755, 0o755), (0o1777, 0o1777), (0o4700, 0o700), (0o644, 0o644)])
def test_restored_attributes_never_set_user_or_group_id(tmp_path, mode, kept):
    path = tmp_path / "f"
    path.write_text("x")
    s.set_attributes(str(path), mode, 1_600_000_000_123_456_789)
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == kept and st.st_mtime_ns == 1_600_000_000_123_456_789


def test_a_links_attributes_are_its_own_and_its_target_is_untouched(tmp_path):
    target = tmp_path / "target"
    target.write_text("x")
    os.chmod(target, 0o600)
    before = os.stat(target)
    os.symlink(target, tmp_path / "link")
    s.set_attributes(str(tmp_path / "link"), 0o777, 1_500_000_000_000_000_000, link=True)
    assert os.lstat(tmp_path / "link").st_mtime_ns == 1_500_000_000_000_000_000
    after = os.stat(target)
    assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns)


def test_no_mode_or_mtime_changes_nothing(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    before = os.stat(path)
    s.set_attributes(str(path), None, None)
    after = os.stat(path)
    assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns)
