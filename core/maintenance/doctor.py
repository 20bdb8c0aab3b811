"""``blobstate doctor``: the checks an operator runs first, each a line with ok / warn / fail.

In order, stopping where a later check would only repeat an earlier failure:

1. ``endpoint``: the storage endpoint answers and the credentials are accepted (a bounded bucket check);
2. ``bucket``: the bucket (container) the URL names exists;
3. ``repository``: the repository marker (its id, format version, creator); ``key``, for an encrypted repository:
   the configured key unwraps its data key, checked before anything is written (a wrong key or none fails here and
   nothing below runs: rule 20, exit 3);
4. ``checkpoint log``: the log this command was given is the one the marker records (``log_identity``), and it
   answers (its stores);
5. ``clock skew``: this host's clock against the store's, from the last-modified time of an object written now
   (blobstate's TTLs tolerate a skew below a quarter of the TTL, see ``docs/architecture.md``);
6. ``store semantics``: what the protocol relies on, tried in a scratch prefix that is removed afterwards, the way
   Elasticsearch's repository analysis API tries a snapshot repository: a conditional create refuses a second
   create of the same object (the file log's fencing), a written object reads back at once (read-after-write) and
   is listed at once (list-after-write), a deleted one is gone from the listing; a store whose ``rewrite`` (the
   Rewrite door of the marker) is the interface's unconditional default warns;
7. ``open commits``: commits this host's work directory holds open for this repository (``blobstate recover``);
8. ``gc``: what ``blobstate gc`` would do now (a dry run): blobs waiting for their TTL, expired ones it would delete,
   orphans, checkpoints beyond retention;
9. ``checkpoints``: the retained checkpoints' age per store (the newest one's age warns past ``stale_after_ms``).

``run`` never changes the repository outside its scratch prefix (``doctor/<random>/``), removes what it wrote there
(the folder too, on file://) and never raises for what it checks: a failure is a ``fail`` line. Exit code of the
CLI: 3 when the key fails, 1 when another check fails, else 0 (``DoctorReport.exit_code``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from blobstate.config.settings import Settings
from blobstate.config.units import format_duration
from blobstate.errors import EXIT_ERROR, EXIT_INTEGRITY, EXIT_OK, BlobstateError, StorageLocationError
from blobstate.model import layout
from blobstate.model.layout import DEFAULT_TTL_MS, now_ms
from blobstate.plugin.capabilities import folder_removal
from blobstate.plugin.interfaces import BlobStore, PutRequest

OK, WARN, FAIL = "ok", "warn", "fail"
#: Scratch objects live under this prefix (never a store's: a store key has three parts).
SCRATCH_PREFIX = layout.SCRATCH
#: A skew beyond this warns (ms); beyond a quarter of the TTL it fails (TTLs are decided on the store's clock).
SKEW_WARN_MS = 30_000
#: The newest checkpoint of a store older than this warns (ms): the job may have stopped committing.
STALE_AFTER_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True)
class Check:
    """One check: ``name``, ``status`` (``ok``, ``warn``, ``fail``), a one-line ``detail``, ``data`` for scripts."""

    name: str
    status: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"check": self.name, "status": self.status, "detail": self.detail, **({"data": self.data}
                                                                                    if self.data else {})}


@dataclass
class DoctorReport:
    """Every check made, in order; ``failed`` when any is ``fail``."""

    url: str
    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(c.status == FAIL for c in self.checks)

    @property
    def exit_code(self) -> int:
        """The CLI's exit code: 3 when the key check failed (a wrong key or none, as every verb exits), 1 when any
        other check failed, else 0."""
        if any(c.name == "key" and c.status == FAIL for c in self.checks):
            return EXIT_INTEGRITY
        return EXIT_ERROR if self.failed else EXIT_OK

    def add(self, name: str, status: str, detail: str, **data: Any) -> Check:
        check = Check(name, status, detail, data)
        self.checks.append(check)
        return check

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.url, "ok": not self.failed, "checks": [c.to_json() for c in self.checks]}


def _fault(exc: BaseException, url: str) -> str:
    """A one-line description of ``exc``: the translated storage message where there is one."""
    from blobstate.config.options import redact
    from blobstate.repository.translate import translate

    translated = translate(exc, url)
    if translated is not None:
        return str(translated)
    return str(redact(f"{type(exc).__name__}: {exc}" if not isinstance(exc, BlobstateError) else str(exc)))


def run(*, repo: str, log: str | None = None, storage_options: dict[str, Any] | None = None,
        log_options: dict[str, Any] | None = None, work_base: str | None = None, ttl_ms: int = DEFAULT_TTL_MS,
        stale_after_ms: int = STALE_AFTER_MS, clock: Callable[[], int] = now_ms,
        settings: Settings | None = None) -> DoctorReport:
    """Check the repository at ``repo`` and its checkpoint log ``log`` (default: the file log inside it).

    ``ttl_ms``: the TTL the writers use (the clock skew's limit is a quarter of it); ``work_base``: this host's work
    directory base (default: the settings', ``BLOBSTATE_WORK_DIR`` or the platform's); ``clock``: ms since the
    epoch (tests); ``settings``: what it runs with (``Settings.for_call``, as every verb). Raises only
    ``ConfigurationError`` for an unusable URL or option (before anything is checked).
    """
    from blobstate.config.options import redact
    from blobstate.repository.backends import normalize_url, open_blob_store

    settings = Settings.for_call(settings, work_base=work_base)
    url = normalize_url(repo)
    report = DoctorReport(str(redact(url)))
    store = open_blob_store(url, settings=settings, storage_options=storage_options)
    try:
        if not _reach(report, store, url):
            return report
        info = _marker(report, store, url)
        if info is None or not _key(report, info, url, settings):
            return report
        _skew_and_semantics(report, store, url, ttl_ms, clock)
        repository = _log(report, repo, url, log, storage_options, log_options, info, settings)
        _open_commits(report, info, url, settings.work_base)
        if repository is not None:
            try:
                _gc_and_ages(report, repository, url, work_base, ttl_ms, stale_after_ms, clock)
            finally:
                repository.close()
        return report
    finally:
        store.close()


def _reach(report: DoctorReport, store: BlobStore, url: str) -> bool:
    started = time.monotonic()
    try:
        exists = store.location_exists()
        if exists is None:  # a local directory, or a store that cannot tell: a listing reaches it
            next(iter(store.list(SCRATCH_PREFIX)), None)
    except StorageLocationError as exc:
        if exc.reason == "missing-bucket":
            report.add("endpoint", OK, "the storage endpoint answered")
            report.add("bucket", FAIL, str(exc))
        else:
            report.add("endpoint", FAIL, str(exc), reason=exc.reason)
        return False
    except Exception as exc:  # noqa: BLE001 - every fault is a line of the report
        report.add("endpoint", FAIL, _fault(exc, url))
        return False
    elapsed = int((time.monotonic() - started) * 1000)
    report.add("endpoint", OK, f"reached in {elapsed} ms, credentials accepted", elapsedMs=elapsed)
    if exists is False:
        from blobstate.repository.translate import missing_bucket

        report.add("bucket", FAIL, str(missing_bucket(url)))
        return False
    report.add("bucket", OK, "exists" if exists else "a local directory (created by the first backup)")
    return True


def _marker(report: DoctorReport, store: BlobStore, url: str) -> Any:
    from blobstate.config.units import iso_time
    from blobstate.repository.location import scan_location
    from blobstate.repository.marker import read_marker

    try:
        info = read_marker(store)
        if info is None:
            empty, legacy = scan_location(store)
            if legacy:
                report.add("repository", WARN, "a repository from before the marker: its next backup writes one")
                from blobstate.repository.marker import FORMAT_VERSION, RepositoryInfo

                return RepositoryInfo("", FORMAT_VERSION, None, "", legacy=True)
            report.add("repository", FAIL, f"no blobstate repository at {report.url}" + (
                " (an empty location: the first `blobstate backup` or `blobstate init` creates one)" if empty else
                " and the location holds other objects: check --repo"))
            return None
    except Exception as exc:  # noqa: BLE001
        report.add("repository", FAIL, _fault(exc, url))
        return None
    report.add("repository", OK, f"repository {info.repository_id}, format {info.format_version}, created "
               f"{iso_time(info.created_time_ms) or 'at an unknown time'} by {info.created_by or 'unknown'}",
               repositoryId=info.repository_id)
    return info


def _key(report: DoctorReport, info: Any, url: str, settings: Settings) -> bool:
    """An encrypted repository's data key unwrapped with the configured key (``BLOBSTATE_KEY_FILE``, ``--key-file``)
    before anything is written (rule 20); False (a ``fail`` line, exit 3) when it does not unwrap."""
    from blobstate.codec.keys import KeyConfig, open_cipher

    if info.legacy or info.encryption is None:
        return True
    try:
        open_cipher(info.encryption, info.repository_id, KeyConfig.of(settings), url=url, writing=False)
    except BlobstateError as exc:
        report.add("key", FAIL, _fault(exc, url))
        return False
    report.add("key", OK, f"the configured key opens the repository (key {info.encryption.get('keyId')}, "
               f"{info.encryption.get('algorithm')})")
    return True


def _skew_and_semantics(report: DoctorReport, store: BlobStore, url: str, ttl_ms: int,
                        clock: Callable[[], int]) -> None:
    scratch = layout.scratch_prefix(uuid.uuid4().hex)
    probe, exclusive = f"{scratch}/probe", f"{scratch}/exclusive"
    payload = uuid.uuid4().bytes
    written: list[str] = []
    try:
        before = clock()
        store.put(PutRequest(probe, payload))
        after = clock()
        written.append(probe)
        _clock_skew(report, store, scratch, probe, (before + after) // 2, after - before, ttl_ms)
        problems = _semantics(store, scratch, probe, exclusive, payload, written)
        if problems:
            report.add("store semantics", FAIL, "; ".join(problems))
        elif not store.conditional_rewrite:
            report.add("store semantics", WARN, "conditional create, read-after-write, list-after-write and delete "
                       "hold, but the store rewrites the repository marker with a check and a plain write, neither "
                       "atomic nor conditional: never run two key rotations or log changes at once (a plugin "
                       "implements BlobStore.rewrite with its service's conditional write: docs/plugins.md)")
        else:
            report.add("store semantics", OK, "conditional create refuses a second create, conditional rewrite, "
                       "read-after-write, list-after-write and delete hold")
    except Exception as exc:  # noqa: BLE001
        report.add("store semantics", FAIL, f"the scratch objects under {scratch}/ could not be written: "
                   f"{_fault(exc, url)}")
    finally:
        try:
            store.delete_many(written)
            remove = folder_removal(store)
            if remove is not None:
                remove(scratch)  # file://: the scratch folder (and doctor/, when no other run uses it)
        except Exception as exc:  # noqa: BLE001
            report.add("cleanup", WARN, f"scratch objects under {scratch}/ are left: {_fault(exc, url)}")


def _clock_skew(report: DoctorReport, store: BlobStore, scratch: str, probe: str, local_ms: int, spread_ms: int,
                ttl_ms: int) -> None:
    listed = {info.blob_id: info for info in store.list(scratch)}
    modified = listed[probe].modified_ms if probe in listed else None
    if modified is None:
        report.add("clock skew", WARN, "the store gives no last-modified time: skew not measured")
        return
    skew = modified - local_ms
    # The store's timestamp may be rounded to the second (S3's Last-Modified): that much is not skew.
    tolerance = 1000 + spread_ms
    size = max(0, abs(skew) - tolerance)
    text = f"{'+' if skew >= 0 else '-'}{format_duration(abs(skew))} (store - this host, +/- " \
           f"{format_duration(tolerance)})"
    if size > ttl_ms // 4:
        report.add("clock skew", FAIL, f"{text}: more than a quarter of the TTL ({format_duration(ttl_ms)}): blob "
                   "TTLs would expire early or late; fix this host's clock (NTP)", skewMs=skew)
    elif size > SKEW_WARN_MS:
        report.add("clock skew", WARN, f"{text}: check this host's clock (NTP)", skewMs=skew)
    else:
        report.add("clock skew", OK, text, skewMs=skew)


def _semantics(store: BlobStore, scratch: str, probe: str, exclusive: str, payload: bytes,
               written: list[str]) -> list[str]:
    problems = []
    if store.get_bytes(probe) != payload:
        problems.append("read-after-write failed: the object just written reads back different bytes")
    store.put_exclusive(exclusive, b"first")
    written.append(exclusive)
    try:
        store.put_exclusive(exclusive, b"second")
        problems.append("conditional create does not refuse a second create: two writers could both append one "
                        "generation of the file log (use a store with If-None-Match / conditional create, or an "
                        "SQL or Kafka checkpoint log)")
    except FileExistsError:
        pass
    if store.get_bytes(exclusive) != b"first":
        problems.append("the second conditional create overwrote the first")
    listed = {info.blob_id for info in store.list(scratch)}
    if not {probe, exclusive} <= listed:
        problems.append("list-after-write failed: objects just written are not listed")
    store.delete(probe)
    written.remove(probe)
    if probe in {info.blob_id for info in store.list(scratch)}:
        problems.append("list-after-delete failed: a deleted object is still listed")
    return problems


def _log(report: DoctorReport, repo: str, url: str, log: str | None, storage_options: dict[str, Any] | None,
         log_options: dict[str, Any] | None, info: Any, settings: Settings) -> Any:
    from blobstate.repository.log_identity import describe, log_identity, same_log
    from blobstate.repository.repo import Repository

    identity = log_identity(normalize(log) if log else None, url, log_options)
    if info.checkpoint_log is not None and not same_log(info.checkpoint_log, identity):
        report.add("checkpoint log", FAIL, f"the repository records its log at {describe(info.checkpoint_log)}; "
                   f"this command was given {describe(identity)}: pass --log for the recorded one (moving it on "
                   "purpose: blobstate init --change-log)", recorded=info.checkpoint_log, given=identity)
        return None
    try:
        repository = Repository.open(repo, log=log, storage_options=storage_options, log_options=log_options,
                                     create=False, settings=settings)
        stores = repository.log.keys()
    except Exception as exc:  # noqa: BLE001
        report.add("checkpoint log", FAIL, f"{describe(identity)}: {_fault(exc, url)}")
        return None
    recorded = "" if info.checkpoint_log is not None else " (recorded in the marker now)"
    report.add("checkpoint log", OK, f"{describe(identity)}{recorded}: {len(stores)} store(s)",
               identity=identity, stores=len(stores))
    return repository


def normalize(log: str) -> str:
    from blobstate.repository.backends import normalize_url

    return normalize_url(log)


def _open_commits(report: DoctorReport, info: Any, url: str, base: str) -> None:
    import os

    from blobstate.commit.recover import open_journals
    from blobstate.local import workdir

    # the repository's work directories (named by its id), and those from before named by its URL
    repo_dirs = {os.path.join(base, workdir.host_key(info.repository_id, url)),
                 os.path.join(base, workdir.repository_hash(url))}
    try:
        journals = [j for j in open_journals(base) if os.path.dirname(os.path.dirname(os.path.dirname(j.work_dir)))
                    in repo_dirs]
    except Exception as exc:  # noqa: BLE001
        report.add("open commits", WARN, f"the work directory {base} could not be read: {exc}")
        return
    if not journals:
        report.add("open commits", OK, f"none in this host's work directory ({base})")
        return
    names = ", ".join(str(j.key) for j in journals)
    report.add("open commits", WARN, f"{len(journals)} store(s) with an open commit in {base}: {names}; "
               f"`blobstate recover --repo {report.url}` (or their next backup) finishes or aborts them",
               stores=[str(j.key) for j in journals])


def _gc_and_ages(report: DoctorReport, repository: Any, url: str, work_base: str | None, ttl_ms: int,
                 stale_after_ms: int, clock: Callable[[], int]) -> None:
    from blobstate.maintenance.gc import collect
    from blobstate.maintenance.queries import select_stores

    now = clock()
    try:
        keys = select_stores(repository, None, None, None)
        reports = [collect(repository, key, now_ms=now, ttl_ms=ttl_ms, dry_run=True, work_base=work_base)
                   for key in keys]
        far = now + 100 * 365 * 24 * 3600 * 1000  # every blob that carries a TTL at all expires before this
        waiting = sum(len(repository.store.expired(f"{key.job}/{key.task}/{key.store}", far)) for key in keys)
    except Exception as exc:  # noqa: BLE001
        report.add("gc", FAIL, f"the dry run failed: {_fault(exc, url)}")
        return
    expired = sum(len(r.expired_deleted) for r in reports)
    orphans = sum(len(r.orphans_deleted) for r in reports)
    pruned = sum(len(r.checkpoints_pruned) for r in reports)
    skipped = [f"{r.key}: {r.skipped}" for r in reports if r.skipped]
    waiting = max(0, waiting - expired)
    detail = (f"{waiting} blob(s) waiting for their TTL; gc would delete {expired} expired and {orphans} orphaned "
              f"blob(s) and prune {pruned} checkpoint(s)")
    report.add("gc", WARN if skipped else OK, detail + (f"; skipped: {'; '.join(skipped)}" if skipped else ""),
               waitingForTtl=waiting, expired=expired, orphans=orphans, pruned=pruned)
    _ages(report, repository, keys, now, stale_after_ms)


def _ages(report: DoctorReport, repository: Any, keys: list[Any], now: int, stale_after_ms: int) -> None:
    if not keys:
        report.add("checkpoints", OK, "no store has checkpoints yet")
        return
    lines, stale, ages = [], [], {}
    for key in keys:
        history = repository.log.history(key)
        times = [cp.created_time_ms for cp in history if cp.created_time_ms]
        if not times:
            lines.append(f"{key}: none")
            continue
        newest, oldest = now - max(times), now - min(times)
        ages[str(key)] = {"checkpoints": len(history), "newestAgeMs": newest, "oldestAgeMs": oldest}
        lines.append(f"{key}: {len(history)}, newest {format_duration(max(0, newest))} ago, oldest "
                     f"{format_duration(max(0, oldest))} ago")
        if newest > stale_after_ms:
            stale.append(str(key))
    status = WARN if stale else OK
    suffix = f"; no checkpoint for {format_duration(stale_after_ms)}: {', '.join(stale)}" if stale else ""
    report.add("checkpoints", status, "; ".join(lines) + suffix, stores=ages)
