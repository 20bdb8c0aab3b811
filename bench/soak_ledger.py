"""The soak's ledger: every commit known to be committed, the data it held, and the invariants checked against it.

A commit is known committed when its backup exited 0 and printed it, when a process's trace shows its
``CheckpointWritten`` (a backup's or a recovery's), or when it is seen in the checkpoint log (observed after every
step). Each backup attempt runs with its own ``--batch-id``, recorded in its checkpoint record, so any record in the
log names the attempt, and so the data (a SHA-256 of the writer's key/value pairs when it started) it must restore.

The invariants (``check_log``, ``check_restorable``, ``check_orphans``):

- **lost**: a known commit whose generation is inside the retention window of the log's latest generation but the
  log does not hold it at that generation (or the log's latest is below a known commit's generation);
- **unrestorable**: a checkpoint the log holds that ``verify`` rejects or whose restore does not equal the data
  its attempt held; a record no attempt made is a problem too;
- **orphans** (after the final recovery and the final gc): objects under the store's prefix that no retained
  snapshot references, references with no object, leases left, temporaries left under ``checkpoints/``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from bench.soak_world import KEY, Attempt, Proc, World, digest, read_all
from blobstate.errors import BlobstateError
from blobstate.maintenance.gc import FAR_FUTURE_MS
from blobstate.model.records import Checkpoint
from blobstate.repository.repo import Repository


@dataclass
class Commit:
    checkpoint_id: str
    generation: int
    attempt: int | None
    how: str  # how it became known: "exit 0", "trace", "log"


@dataclass
class Ledger:
    attempts: dict[int, Attempt] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)
    attempt_of_commit: dict[str, int] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)
    unrestorable: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    orphans: dict[str, list[str]] = field(default_factory=dict)

    def _known(self, checkpoint_id: str, generation: int, attempt: int | None, how: str) -> None:
        known = self.commits.get(checkpoint_id)
        if known is None:
            self.commits[checkpoint_id] = Commit(checkpoint_id, generation, attempt, how)
        elif known.generation != generation:
            self.problems.append(f"commit {checkpoint_id} known at generation {known.generation} ({known.how}) and "
                                 f"{generation} ({how})")
        if attempt is not None:
            self.attempt_of_commit.setdefault(checkpoint_id, attempt)

    def record(self, proc: Proc) -> None:
        """What a finished process tells: the commit a backup started and printed, every ``CheckpointWritten``."""
        if proc.kind == "backup" and proc.attempt is not None:
            attempt = self.attempts[proc.attempt]
            attempt.returncode = proc.returncode
            attempt.commit_id = proc.commit_id()
            if attempt.commit_id:
                self.attempt_of_commit[attempt.commit_id] = attempt.number
            result = proc.json() if proc.returncode == 0 else None
            if isinstance(result, dict):
                self._known(result["checkpointId"], int(result["generation"]), attempt.number, "exit 0")
        for fields in proc.trace:
            if fields[0] == "CheckpointWritten" and len(fields) == 3:
                self._known(fields[1], int(fields[2]), self.attempt_of_commit.get(fields[1]), "trace")

    def observe(self, history: list[Checkpoint]) -> None:
        """Every record in the log is a commit; its batch id names the attempt."""
        for cp in history:
            self._known(cp.checkpoint_id, cp.generation, cp.batch_id, "log")
            if cp.batch_id is not None:
                self.attempt_of_commit.setdefault(cp.checkpoint_id, cp.batch_id)

    def check_log(self, history: list[Checkpoint], retain: int) -> None:
        """No known commit inside the retention window is missing from the log (see the module docstring)."""
        self.observe(history)
        at = {cp.generation: cp for cp in history}
        latest = max(at, default=0)
        for commit in self.commits.values():
            if commit.checkpoint_id in self.lost:
                continue
            if commit.generation > latest:
                self.lost[commit.checkpoint_id] = f"generation {commit.generation} > the log's latest {latest}"
            elif commit.generation > latest - retain and (commit.generation not in at or
                                                          at[commit.generation].checkpoint_id != commit.checkpoint_id):
                self.lost[commit.checkpoint_id] = (f"generation {commit.generation} (known by {commit.how}) inside "
                                                   f"the retention window of {latest} is not in the log")
        for generation in range(max(1, latest - retain + 1), latest + 1):
            if generation not in at:
                self.problems.append(f"generation {generation} missing from the log's retention window ({latest})")

    def missing(self, repo: Repository, history: list[Checkpoint]) -> dict[str, list[str]]:
        """Per checkpoint of ``history``: the objects it references (index included) that the store lacks, or why
        its index does not read; in process, cheap enough to run after every point."""
        present = {i.blob_id for i in repo.store.list(KEY.prefix)}
        out: dict[str, list[str]] = {}
        for cp in history:
            try:
                refs = {cp.index_blob_id} | repo.read_index(cp).referenced_blob_ids()
            except BlobstateError as exc:
                out[cp.checkpoint_id] = [f"index unreadable: {exc}"]
                continue
            if refs - present:
                out[cp.checkpoint_id] = sorted(refs - present)
        return out

    def check_restorable(self, world: World, history: list[Checkpoint], tag: str) -> None:
        """``verify --all`` passes, and every checkpoint the log holds restores to the data its attempt held."""
        verified = world.spawn("verify", "check", world.root / "check-host",
                               ["verify", *world.repo_args(), "--all", "--json"])
        code = verified.finish()
        for report in verified.json() or []:
            if not report.get("ok"):
                self.unrestorable.setdefault(report["checkpointId"], f"{tag}: verify: {report['problems'][:3]}")
        if code != 0:
            self.problems.append(f"{tag}: verify --all exited {code}: {verified.err()[-1000:]}")
        for cp in history:
            attempt = self.attempts.get(cp.batch_id) if cp.batch_id is not None else None
            if attempt is None:
                self.problems.append(f"{tag}: checkpoint {cp.checkpoint_id} names no attempt (batch {cp.batch_id})")
                continue
            why = restore_matches(world, cp.checkpoint_id, attempt.digest, f"{tag}-{cp.generation}")
            if why:
                self.unrestorable.setdefault(cp.checkpoint_id, f"{tag}: {why}")

    def scan(self, world: World, history: list[Checkpoint]) -> dict[str, list[str]]:
        """The store's objects against the references of ``history``: orphans (unreferenced objects), missing
        (references with no object), leases (every blob still carrying a TTL), referencedWithTtl, temporaries."""
        repo = Repository.open(world.target.url, storage_options=world.target.options)
        try:
            referenced = repo.retained_references(history)
            objects = {i.blob_id for i in repo.store.list(KEY.prefix)}
            with_ttl = set(repo.store.expired(KEY.prefix, FAR_FUTURE_MS))
            temporaries = [t.blob_id for t in repo.store.temporaries("checkpoints")]
        finally:
            repo.close()
        return {"orphans": sorted(objects - referenced), "missing": sorted(referenced - objects),
                "leases": sorted(with_ttl), "referencedWithTtl": sorted(with_ttl & referenced),
                "temporaries": temporaries}

    def check_orphans(self, world: World, history: list[Checkpoint]) -> dict[str, list[str]]:
        """After the final recovery and gc: the store's objects are exactly the retained snapshots' references,
        no TTL is left on any blob, no temporary under ``checkpoints/``."""
        self.orphans = self.scan(world, history)
        return self.orphans


def restore_matches(world: World, checkpoint_id: str, expected: str, name: str, *, cleanup: bool = False,
                    dest: Path | None = None) -> str | None:
    """Restore ``checkpoint_id`` on the restore host (into a fresh directory, or into ``dest`` over what a previous
    restore left there); None when it restored exactly the data whose digest is ``expected``, else why not.
    Without ``cleanup`` the restore skips its init cleanup (a check must not change the repository)."""
    fresh = dest is None
    dest = dest or world.root / "restores" / name / KEY.store
    args = ["restore", str(dest), *world.repo_args(), "--checkpoint", checkpoint_id, "--json", "-q"]
    proc = world.spawn("restore", "restore", world.root / "restore-host", args + ([] if cleanup else ["--no-cleanup"]))
    try:
        if proc.finish() != 0:
            return f"restore exited {proc.returncode}: {proc.err()[-800:]}"
        got = digest(read_all(dest))
        return None if got == expected else (f"restored data differs from what the commit held ({got[:12]} != "
                                             f"{expected[:12]})")
    finally:
        if fresh:
            shutil.rmtree(dest.parent, ignore_errors=True)
