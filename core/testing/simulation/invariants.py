"""The invariants checked after every scheduled step, on the world as it is (no scheduling point is taken).

For every checkpoint log of the repository and every store key in it, with the store's retention window
(``blobstate.model.chain.retention`` with the smallest ``retain`` its writers use):

- ``lost``: nothing a retained record references is missing from the store (its index, the index's blobs, a
  delta's changelog, a group's parts). A record that is still landing (appended, its commit not completed: a
  late commit heals its blobs right after the append) is given until its commit completes, or until the final
  check after every open commit was recovered; a group record's changelogs, which its partitions' executors put
  back, until a group of a later batch of the store completed (at the end: until the final commit's tasks ran).
  A snapshot part a later delta of its batch overrides (a lost one the owner voided) is needed by nothing and not
  checked.
- ``broken``: the latest state is restorable (``plan_chain`` finds every record it needs) and every retained
  snapshot too (no store is wedged on a pruned chain).
- ``wrong``: the latest state, and every retained snapshot, restores to exactly the state of its batch
  (``blobstate.testing.simulation.model``); the restore is done logically on the real readers
  (``Repository.read_index`` and ``read_changelog``, CRC-checked) so that it can run after every step.
- ``orphan`` (final check only, after a final gc): every object under a store's prefix is referenced by a
  record.
- ``source`` (a rescale, profile ``rescale``): a rescale never changes its source: no object under the source's
  prefix, no record of its log (``World.on_mutation`` tells the simulation who changes what). The rescaled store
  is checked like any partitioned store above, against the model of the source re-partitioned
  (``model.rescaled``): its state after the batch it names is exactly the source's state after that batch.
- ``rescale`` (the run's end, ``runner.Simulation._rescale_again``): rerun once more, every rescale command commits
  the copy or finds exactly it committed, and nothing the copy references still carries a TTL (finished).

Objects a fault lost or damaged are known (``World.damaged``): a chain that needs one is expected to fail with an
integrity error, never to give a wrong state, and is not held against the protocol.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from blobstate.codec.cipher import ObjectCipher
from blobstate.codec.log import SealedCheckpointLog
from blobstate.errors import BlobstateError, ChecksumMismatch, IntegrityError, NothingToRestore
from blobstate.local.checksum import crc32c_bytes
from blobstate.model import chain as chains
from blobstate.model.chain import overridden_parts
from blobstate.model.index import FileBlob
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.repo import Repository
from blobstate.testing.simulation import model
from blobstate.testing.simulation.world import SimBlobStore, World, history_now, sim_repository


class Violation(Exception):
    """An invariant does not hold: ``kind`` (lost, broken, wrong, orphan, wedged, crash; a rescale's: source,
    rescale) and what."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


@dataclass(frozen=True)
class StoreInfo:
    """A simulated store: its state's model name, the smallest retention its writers use, partitions (0: none)."""

    name: str
    retain: int
    partitions: int = 0


class _Quiet(SimBlobStore):
    """The store as the invariants read it: no scheduling point."""

    def __init__(self, world: World) -> None:
        super().__init__(World(blobs=world.blobs, logs=world.logs, damaged=world.damaged))


@dataclass
class Checker:
    """Checks ``World`` against the model; ``completed`` is fed with the commit ids whose commit completed."""

    world: World
    stores: dict[StoreKey, StoreInfo]
    log_names: list[str]
    completed: set[str] = field(default_factory=set)
    cipher: ObjectCipher | None = None  # an encrypted repository's (``Scenario.cipher``)
    _refs: dict[tuple[str, str, int], frozenset[str]] = field(default_factory=dict)
    _good: set[tuple] = field(default_factory=set)
    _pending: bool = False
    tampered: list[str] = field(default_factory=list)  # changes a rescale made to its source
    _opened: dict[tuple[str, int, str], Checkpoint] = field(default_factory=dict)

    def __post_init__(self) -> None:
        quiet = _Quiet(self.world)
        self.repos = {name: sim_repository(quiet, name, self.cipher) for name in self.log_names}

    def check(self, *, final: bool = False, next_batch_pending: bool = False) -> None:
        """Raise ``Violation`` for the first invariant that does not hold. ``next_batch_pending`` (at the end, before
        the final commit): a group's lost changelogs are still the executors' to put back at that next batch."""
        self._pending = next_batch_pending
        if self.tampered:
            raise Violation("source", self.tampered[0])
        for log_name, repo in self.repos.items():
            for key, info in self.stores.items():
                history = self._history(repo, log_name, key)
                if history:
                    self._check_store(repo, log_name, key, info, history, final)

    def _history(self, repo: Repository, log_name: str, key: StoreKey) -> list[Checkpoint]:
        """``key``'s records in log ``log_name`` as they are (``history_now``), opened where the log seals them."""
        history = history_now(self.world, log_name, key)
        if not isinstance(repo.log, SealedCheckpointLog):
            return history
        opened = []
        for cp in history:  # each sealed record opened once per run (its body is unique: a fresh nonce)
            memo = (log_name, cp.generation, getattr(cp, "sealed", ""))
            if memo not in self._opened:
                self._opened[memo] = repo.log.open(cp)
            opened.append(self._opened[memo])
        return opened

    def _check_store(self, repo: Repository, log_name: str, key: StoreKey, info: StoreInfo,
                     history: list[Checkpoint], final: bool) -> None:
        _, retained = chains.retention(history, info.retain)
        where = f"{key} in log {log_name}"
        overridden = overridden_parts(history) if info.partitions else set()
        for cp in retained:
            missing = sorted(b for b in self.references(repo, log_name, cp, overridden) if b not in self.world.blobs
                             and b not in self.world.damaged)
            if missing and not self._executors_heal(cp, history) and (final or cp.checkpoint_id in self.completed):
                raise Violation("lost", f"{where}: generation {cp.generation} ({cp.kind} of batch {cp.batch_id}, "
                                        f"writer {cp.writer_id}) references {missing[0]}, which was deleted")
        if info.partitions:
            for p in chains.partitions_of(retained):
                part = chains.partition_history(history, p)
                kept = chains.partition_history(retained, p)
                self._check_states(repo, f"{where} partition {p}", f"{info.name}/p{p}", part, kept, final)
        else:
            self._check_states(repo, where, info.name, history, retained, final)

    def _executors_heal(self, cp: Checkpoint, history: list[Checkpoint]) -> bool:
        """True while a group record's lost changelogs may still be put back by its partitions' executors: until
        a group of a later batch of the store completed (its tasks heal first, ``blobstate.commit.parts.heal_parts``;
        a void of the same batch is no such group)."""
        if not cp.is_group:
            return False
        if self._pending:
            return True
        return not any(later.is_group and later.generation > cp.generation
                       and (later.batch_id or 0) > (cp.batch_id or 0) and later.checkpoint_id in self.completed
                       for later in history)

    def references(self, repo: Repository, log_name: str, cp: Checkpoint,
                    overridden: set[str] | frozenset[str] = frozenset()) -> frozenset[str]:
        """The objects ``cp`` (of log ``log_name``) references, its ``overridden`` snapshot parts left out."""
        if cp.is_group and overridden and any(e.checkpoint_id in overridden for e in cp.partitions):
            return frozenset().union(*(self.references(repo, log_name, part) for part in cp.expand()
                                       if part.checkpoint_id not in overridden))
        memo = (log_name, cp.checkpoint_id, cp.generation)
        refs = self._refs.get(memo)
        if refs is None:
            try:
                refs = frozenset(repo.retained_references([cp]))
            except IntegrityError:  # the index itself is missing or damaged: it is its only reference we know
                return frozenset(part.index_blob_id for part in cp.expand() if not part.is_delta)
            self._refs[memo] = refs
        return refs

    def _check_states(self, repo: Repository, where: str, name: str, history: list[Checkpoint],
                      retained: list[Checkpoint], final: bool) -> None:
        try:
            latest = chains.plan_chain(history)
        except NothingToRestore as exc:  # BrokenChainError included
            raise Violation("broken", f"{where}: the latest state does not restore: {exc}") from None
        self._check_chain(repo, where, name, latest, final)
        for snap in chains.valid_snapshots(retained):
            if snap.batch_id is not None:
                self._check_chain(repo, where, name, chains.Chain(snap, (), snap.batch_id), final)

    def _check_chain(self, repo: Repository, where: str, name: str, chain: chains.Chain, final: bool) -> None:
        memo = (where, tuple((cp.checkpoint_id, cp.generation) for cp in chain.records), len(self.world.damaged))
        if memo in self._good:
            return
        upto = chain.upto if chain.upto is not None else (chain.snapshot.batch_id if chain.snapshot else None)
        try:
            values = self.restore(repo, chain)
        except IntegrityError as exc:
            if self._explained(repo, chain, final):
                return
            raise Violation("lost", f"{where}: the chain up to batch {upto} does not restore: {exc}") from None
        if upto is None:
            return
        expected = model.state(model.chain_name(name, chain.records), upto)
        if values != expected:
            raise Violation("wrong", f"{where}: the state of batch {upto} restores as {values}, expected {expected} "
                                     f"(chain {chain.describe()})")
        self._good.add(memo)

    def _explained(self, repo: Repository, chain: chains.Chain, final: bool) -> bool:
        """True when the chain's failure is a fault's doing, or a landing commit's not healed yet."""
        for cp in chain.records:
            ids = ({cp.changelog_blob_id} - {""}) if cp.is_delta else {cp.index_blob_id}
            if not cp.is_delta:
                try:
                    ids |= repo.read_index(cp).referenced_blob_ids()
                except BlobstateError:
                    pass
            if ids & self.world.damaged:
                return True
            gone = any(b not in self.world.blobs for b in ids)
            if gone and not final and cp.checkpoint_id not in self.completed:
                return True
            if gone and self._pending and getattr(cp, "partition", None) is not None:
                return True  # a group's part: its executor puts it back at the next batch
        return False

    @staticmethod
    def restore(repo: Repository, chain: chains.Chain) -> dict[str, str]:
        """The state ``chain`` restores to, read with the real (CRC-checking) readers; raises ``IntegrityError``."""
        values: dict[str, str] = {}
        if chain.snapshot is not None:
            index = repo.read_index(chain.snapshot)
            for rel, f in index.dir_index.walk_present():
                data = b"".join(_read(repo, b) for b in f.blobs)
                if len(data) != f.size_in_bytes or crc32c_bytes(data) != f.crc32c:
                    raise ChecksumMismatch(f"{rel} of {chain.snapshot.checkpoint_id} does not match its index")
                values[rel] = data.decode("utf-8", "replace")
        for delta in chain.deltas:
            values = model.replay(values, repo.read_changelog(delta), delta.changelog_blob_id)
        return values

    def orphans(self) -> None:
        """Final check: every object under a store's prefix is referenced by a record of some log (gc keeps what
        the latest snapshot's recorded retention keeps, which may be more than the smallest)."""
        referenced: set[str] = set()
        for log_name, repo in self.repos.items():
            for key in self.stores:
                history = self._history(repo, log_name, key)
                for cp in history:
                    referenced |= self.references(repo, log_name, cp)
        for key in self.stores:
            if any(b.startswith(key.prefix + "/") for b in self.world.damaged):
                continue  # a retained index a fault took stops gc for the store (nothing deleted on a partial view)
            for blob_id in sorted(self.world.blobs):
                if blob_id.startswith(key.prefix + "/") and blob_id not in referenced:
                    raise Violation("orphan", f"{blob_id} is left after the final gc; no retained record names it")


def _read(repo: Repository, blob: FileBlob) -> bytes:
    """A data blob's plain bytes, decoded as its index entry says (``Repository.read_blob``)."""
    buf = io.BytesIO()
    repo.read_blob(blob, buf)
    return buf.getvalue()
