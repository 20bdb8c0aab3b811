"""This host's state of a repository (issue 39): where a store's work directory is (journal, lock, local checkpoints,
checksum cache, completion marks) and what the journal keeps of a commit's record.

**Keyed by the repository's id.** Every work directory and the object cache of a repository are named by the id its
marker records (``workdir.host_key``), never by a URL: two repositories reached at one URL (one bucket name on two
endpoints, two accounts) never share a journal, a lock, a completion mark or a cache, and one repository reached at
two URLs keeps one. A repository from before the marker (no id) keeps the hash of its URL.

**Work directories from before.** They were named by a hash of the URL (``workdir.repository_hash``). The first time
a store's new work directory is asked for while the old one exists (``work_dir``), the old one is moved to the new
place, journal, local checkpoints and all, when nothing in it says it belongs to another repository that URL also
reaches: every open commit of its journal is this repository's by evidence (its recorded repository id; or, for a
commit whose append may have landed, one of its uploads in this repository's store, or its record in this log),
and its completion mark names a checkpoint of this log. Otherwise it is left where it is with a warning naming it:
`blobstate recover` (with no options) still recovers it against the repository its journal names, and a writer
that opens meanwhile takes the store over (restore's init cleanup), so nothing is silently orphaned.

**A record in the journal.** ``CheckpointAppending`` keeps the record it sends, to re-append it in recovery; in an
encrypted repository it is sealed under the data key (``blobstate.codec.journal``): a delta's record carries the
batch's keys and values when its changelog goes inline.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from blobstate.config.settings import Settings
from blobstate.errors import CorruptIndexError, CorruptJournalError
from blobstate.journal.file import Journal
from blobstate.journal.projection import CommitPhase, CommitState, project
from blobstate.local import workdir
from blobstate.local.files import try_lock
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.repo import Repository

log = logging.getLogger(__name__)


def repository_id(repo: Repository) -> str:
    """The id ``repo``'s marker records ("" for a repository from before the marker, or one assembled without it)."""
    return repo.info.repository_id if repo.info is not None else ""


def host_key(repo: Repository) -> str:
    """The name of ``repo``'s directories on this host (``workdir.host_key``: its id from the marker)."""
    return workdir.host_key(repository_id(repo), repo.url)


def work_dir(repo: Repository, key: StoreKey, base: str | None = None) -> str:
    """``key``'s work directory of ``repo`` under ``base`` (default: the work directory base of the settings
    ``repo`` was opened with, ``Settings.work_base``), keyed by the repository's id; a work directory of the store
    from before (keyed by the URL) is moved there first when it is provably this repository's (the module
    docstring)."""
    base = base or repo.settings.work_base
    path = workdir.store_work_dir(host_key(repo), key, base)
    if repository_id(repo) and not os.path.exists(path):
        _adopt(repo, key, workdir.url_keyed_work_dir(repo.url, key, base), path)
    return path


def work_dirs(repo: Repository, key: StoreKey, base: str | None = None) -> list[str]:
    """``key``'s work directories of ``repo`` under ``base`` that exist, changing nothing: the one keyed by the
    repository's id and one from before (keyed by the URL) not moved yet; for what reads journals without committing
    (gc's in-flight check, `journal show`, doctor). ``base`` defaults as ``work_dir``'s."""
    base = base or repo.settings.work_base
    paths = [workdir.store_work_dir(host_key(repo), key, base), workdir.url_keyed_work_dir(repo.url, key, base)]
    return [p for p in dict.fromkeys(paths) if os.path.isdir(p)]


def located_work_dir(url: str, key: StoreKey, settings: Settings, base: str | None = None,
                     storage_options: dict[str, Any] | None = None) -> str:
    """``key``'s work directory of the repository at ``url`` under ``base`` (default: ``settings.work_base``),
    found by reading its marker alone (no key, no log, nothing written): the one keyed by its id, or the one from
    before (keyed by the URL) while only that one exists."""
    from blobstate.repository.backends import normalize_url, open_blob_store
    from blobstate.repository.marker import read_marker

    url = normalize_url(url)
    store = open_blob_store(url, settings=settings, storage_options=storage_options)
    try:
        info = read_marker(store)
    finally:
        store.close()
    base = base or settings.work_base
    path = workdir.store_work_dir(workdir.host_key(info.repository_id if info else "", url), key, base)
    legacy = workdir.url_keyed_work_dir(url, key, base)
    return legacy if not os.path.isdir(path) and os.path.isdir(legacy) else path


def _adopt(repo: Repository, key: StoreKey, legacy: str, path: str) -> None:
    if not os.path.isdir(legacy):
        return
    try:
        why = foreign(repo, key, legacy)
    except (CorruptJournalError, OSError) as exc:
        why = f"it cannot be read ({exc})"
    if why is not None:
        log.warning("the work directory %s of %s (from before work directories were named by repository id) is "
                    "left where it is: %s; `blobstate recover` recovers its journal against the repository it names",
                    legacy, key, why)
        return
    fd = try_lock(os.path.join(legacy, workdir.LOCK), 0o644)
    if fd is None:
        return  # an older blobstate commits from it right now: it stays its own
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        reroot_journal(legacy, legacy, path)  # its local checkpoints' paths, as they will be
        try:
            os.rename(legacy, path)
        except OSError:
            reroot_journal(legacy, path, legacy)
            raise
    except FileExistsError:
        return  # another process moved it, or made the new one, first
    except OSError as exc:
        log.warning("could not move the work directory %s to %s: %s", legacy, path, exc)
        return
    finally:
        os.close(fd)
    log.info("moved the work directory of %s from %s to %s (named by the repository's id now)", key, legacy, path)


def reroot_journal(work_dir: str, old: str, new: str) -> None:
    """Rewrite the journal in ``work_dir`` (atomically) with the local checkpoint paths it names under ``old`` named
    under ``new`` instead: a journal names them whole, and a work directory moved keeps its journal's commits
    recoverable (``cleanup.checked_local_path`` refuses a path outside the work directory)."""
    from msgspec.structs import replace

    from blobstate.journal import events as ev

    def moved(path: str) -> str:
        return new + path[len(old):] if path.startswith(old + os.sep) else path

    journal = Journal(os.path.join(work_dir, workdir.JOURNAL))
    if not os.path.exists(journal.path):
        return
    events: list[ev.Event] = []
    for event in journal.read().events:
        if isinstance(event, ev.LocalCheckpointCreated):
            event = replace(event, path=moved(event.path))
        elif isinstance(event, ev.LocalCheckpointsPruned):
            event = replace(event, paths=tuple(moved(p) for p in event.paths))
        events.append(event)
    journal.compact(events)


def foreign(repo: Repository, key: StoreKey, legacy: str) -> str | None:
    """Why the work directory ``legacy`` (keyed by the URL) may belong to another repository than ``repo``; None when
    everything in it is ``repo``'s by evidence (the module docstring)."""
    ours = repository_id(repo)
    states = [s for s in project(Journal(os.path.join(legacy, workdir.JOURNAL)).read().events).values() if s.is_open]
    needing = []
    for state in states:
        if state.repository_id:
            if state.repository_id != ours:
                return f"its open commit {state.commit_id} belongs to repository {state.repository_id}"
        elif state.phase >= CommitPhase.APPENDING:
            needing.append(state)
    mark = workdir.last_completed(legacy)
    if not needing and mark is None:
        return None
    history = {cp.checkpoint_id for cp in repo.log.history(key)}
    if mark is not None and mark not in history:
        return f"its last completed checkpoint {mark} is not in this repository's log"
    present = {info.blob_id for info in repo.store.list(key.prefix)} if needing else set()
    for state in needing:
        if state.commit_id not in history and not state.blob_ids & present:
            return f"its open commit {state.commit_id} may have landed, and nothing of it is in this repository"
    return None


def journal_record(repo: Repository, key: StoreKey, commit_id: str, record: Checkpoint) -> str:
    """``record`` as the journal keeps it (``CheckpointAppending``): sealed under the data key in an encrypted
    repository (``blobstate.codec.journal``), its JSON as it is otherwise."""
    from blobstate.codec.journal import seal_record

    return seal_record(repo.cipher, f"{key}/{commit_id}", record.to_bytes().decode())


def journaled_record(repo: Repository, key: StoreKey, state: CommitState) -> Checkpoint:
    """The record ``journal_record`` kept for the open commit ``state``. Raises ``CorruptJournalError`` (exit 3) when
    it does not open or parse, ``ConfigurationError`` for a sealed one in a repository opened without its key."""
    from blobstate.codec.journal import open_record

    assert state.record is not None
    text = open_record(repo.cipher, f"{key}/{state.commit_id}", state.record)
    try:
        return Checkpoint.from_bytes(text.encode(), source=f"the journal of {state.commit_id}")
    except CorruptIndexError as exc:
        raise CorruptJournalError(str(exc)) from None
