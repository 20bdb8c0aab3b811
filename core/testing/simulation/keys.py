"""The marker's rewriters as actors (issue 39, profile ``keys``): key rotations and commands that record the
checkpoint log, killed, paused and racing each other and every other actor.

The repository starts with an encrypted marker from before the ``checkpointLog`` field (``prepare``): its data key
wrapped by the key file ``k0``, so the first command of any actor that opens it records the log (``bind_log``)
while the rotations rewrite the same object; a ``put`` over an existing object is written in place, as file://
does (``World.torn_overwrites``).

- ``rotator``: `blobstate key rotate` (``blobstate.repository.rotation.rotate_data_key``) from the key the operator
  holds now (the last successful rotation's, ``KeyRing.current``) to key file ``to``. When it succeeds the operator
  retires the old key and holds the new one; when it fails he keeps the old one.
- ``binder``: a command opening the repository with the key the operator holds (``open_cipher``, then
  ``bind_log``), as ``Repository.open`` does.

Invariants (``check`` after every step, ``final`` at the end): the marker as blobstate reads it
(``marker.read_marker``: a kept copy where it is missing or damaged) parses, unless a live actor is writing it in
place right now, and unwraps to the repository's data key with a key the operator holds or a rotation in flight is
writing (never zero good copies: case 1); the key every successful rotation reported opens the repository when it
reports it, and the operator's key opens it at the end (a rotation never lost to a racing rotation or a ``bind_log``
that writes back what it read before: case 2).
"""

from __future__ import annotations

import base64
import os
import random
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from blobstate.codec.keys import KeyConfig, open_cipher
from blobstate.errors import BlobstateError
from blobstate.model.layout import MARKER
from blobstate.repository.log_identity import log_identity
from blobstate.repository.marker import bind_log, ensure_repository, parse_marker, read_marker
from blobstate.repository.rotation import rotate_data_key
from blobstate.testing.simulation.invariants import Violation
from blobstate.testing.simulation.runner import ActorSpec
from blobstate.testing.simulation.scheduler import Fault
from blobstate.testing.simulation.world import SimBlobStore, World

if TYPE_CHECKING:
    from blobstate.testing.simulation.runner import Simulation
    from blobstate.testing.simulation.scheduler import Actor

KEYS = 4  # key files: k0 wraps the data key at the start, k1..k3 are the rotations' targets
SIM_URL = "sim://repo"
LOG_URL = "sim-log://log"


@dataclass
class KeyRing:
    """The operator's key files (``paths``), the repository's data key, the key he holds now (``current``: the last
    successful rotation's), ``(old, new)`` of every rotation he started (``tried``: he keeps both key files until a
    rotation reports) and of every one that exited 0 (``rotated``)."""

    paths: list[str]
    data_key: bytes
    current: int = 0
    tried: list[tuple[int, int]] = field(default_factory=list)
    rotated: list[tuple[int, int]] = field(default_factory=list)
    writers: list[str] = field(default_factory=list)  # the actors that wrote the marker, in order

    _providers: dict[int, object] = field(default_factory=dict)

    def config(self, key: int) -> KeyConfig:
        return KeyConfig(key_file=self.paths[key])

    def unwrap(self, block: dict, repository_id: str, key: int) -> bytes | None:
        """The data key ``block`` (a marker's ``encryption``) holds, unwrapped by key ``key`` (None: it does not)."""
        from blobstate.codec.keys import EncryptionInfo
        from blobstate.plugins.key_file import FileKeyProvider

        provider = self._providers.get(key)
        if provider is None:
            provider = self._providers[key] = FileKeyProvider(options={"key_file": self.paths[key]})
        try:
            info = EncryptionInfo.from_json(block)
            return provider.unwrap(info.wrapped_key, info.key_id, repository_id.encode())  # type: ignore[attr-defined]
        except BlobstateError:
            return None


def add(rng: random.Random, specs: list[ActorSpec], faults: list[Fault], ttl_ms: int) -> None:
    """The ``keys`` profile's actors and their faults, drawn from ``rng``: one to three rotations (the first two
    starting together), two binders, each maybe killed or paused at one of its first scheduling points. They start
    in the first ``ttl_ms / 20``; every other actor after it (each one records the log in the marker too, and the
    first one to do it would leave the binders nothing to race with)."""
    early = ttl_ms // 20
    for spec in specs:
        spec.start_ms += early
    together = rng.randint(0, early)
    names = []
    for i in range(rng.randint(1, 3)):  # one alone races only the binders; two start together
        start = together if i < 2 else rng.randint(0, 2 * early)
        specs.append(ActorSpec(f"kr{i + 1}", "rotator", start, rng.randint(-ttl_ms // 5, ttl_ms // 5),
                               dict(to=i + 1)))
        names.append(f"kr{i + 1}")
    for i in range(2):
        specs.append(ActorSpec(f"kb{i + 1}", "binder", rng.randint(0, early), 0, {}))
        names.append(f"kb{i + 1}")
    for name in names:
        roll = rng.random()
        if roll < 0.4:
            faults.append(Fault("kill", name, rng.randint(1, 10), keep=True))
        elif roll < 0.6:
            faults.append(Fault("pause", name, rng.randint(1, 10), ms=rng.randint(1, ttl_ms // 10)))


def prepare(sim: Simulation) -> None:
    """Key files under the run's directory, and the marker ``blobstate init`` wrote made an encrypted one from
    before the ``checkpointLog`` field (written directly: the world as an older blobstate left it)."""
    from blobstate.codec.keys import EncryptionInfo
    from blobstate.plugins.key_file import FileKeyProvider

    rng = random.Random("keys")  # the same key files in every run: their redaction entries are registered once
    folder = os.path.join(sim.base, "keys")
    os.makedirs(folder, exist_ok=True)
    paths = []
    for i in range(KEYS):
        path = os.path.join(folder, f"k{i}.key")
        with open(path, "w", encoding="ascii") as fh:
            fh.write(rng.randbytes(32).hex())
        os.chmod(path, 0o600)
        paths.append(path)
    data_key = rng.randbytes(32)
    blob = sim.world.blobs[MARKER]
    info = parse_marker(blob.data)
    provider = FileKeyProvider(options={"key_file": paths[0]})
    wrapped = EncryptionInfo("AES-256-GCM", "file", provider.key_id(),
                             provider.wrap(data_key, info.repository_id.encode())).to_json()
    blob.data = replace(info, format_version=2, encryption=wrapped, checkpoint_log=None).to_bytes()
    ring = sim.keyring = KeyRing(paths, data_key)  # type: ignore[attr-defined]
    sim.world.torn_overwrites = True
    sim.world.actor = lambda: (a.name if (a := sim.scheduler.current()) is not None else "")
    told = sim.world.on_mutation

    def mutated(op: str, target: str) -> None:
        if target == MARKER:
            ring.writers.append(sim.world.actor() or "final")
        told(op, target)

    sim.world.on_mutation = mutated


def rotator(sim: Simulation, actor: Actor, *, to: int) -> None:
    ring: KeyRing = sim.keyring  # type: ignore[attr-defined]
    old = ring.current
    ring.tried.append((old, to))
    try:
        rotate_data_key(sim.store, SIM_URL, ring.config(old), ring.config(to))
    except (BlobstateError, OSError):
        return  # the command exits non-zero: the operator keeps his key (and the new key file)
    ring.rotated.append((old, to))
    ring.current = to  # the operator retires ``old``
    if not _opens(sim.world, ring, to):
        raise Violation("key", f"{actor.name} rotated k{old} -> k{to} and exited 0, but k{to} does not open the "
                               f"repository (rotations so far: {ring.rotated}; {_written(ring)})")


def binder(sim: Simulation, actor: Actor) -> None:
    ring: KeyRing = sim.keyring  # type: ignore[attr-defined]
    identity = log_identity(LOG_URL, SIM_URL)
    try:
        info = ensure_repository(sim.store, SIM_URL, create=False, checkpoint_log=identity)
        open_cipher(info.encryption, info.repository_id, ring.config(ring.current), url=SIM_URL, writing=False)
        bind_log(sim.store, info, SIM_URL, identity)
    except (BlobstateError, OSError):
        return  # exits non-zero (a key rotated meanwhile, the marker changed too often): nothing to judge here


def _written(ring: KeyRing) -> str:
    return f"the marker written by {', '.join(ring.writers[-4:]) or 'no one'}, last"


def _quiet(world: World) -> SimBlobStore:
    """The store as the invariants read it: no scheduling point."""
    return SimBlobStore(World(blobs=world.blobs, logs=world.logs, damaged=world.damaged))


def _unwraps(world: World, ring: KeyRing, key: int) -> bool | None:
    """Whether key ``key`` unwraps the marker as blobstate reads it to the data key (None: the marker does not
    read at all)."""
    try:
        info = read_marker(_quiet(world))
    except BlobstateError:
        return None
    if info is None or info.encryption is None:
        return None
    return ring.unwrap(info.encryption, info.repository_id, key) == ring.data_key


def _opens(world: World, ring: KeyRing, key: int) -> bool:
    return bool(_unwraps(world, ring, key))


def check(sim: Simulation) -> None:
    """The per-step invariant (module docstring): some key file the operator has (his current key, or the new key of
    a rotation he started) opens the marker as blobstate reads it, unless a live actor is writing it in place this
    very moment."""
    ring: KeyRing | None = getattr(sim, "keyring", None)
    if ring is None:
        return
    writer = sim.world.in_place.get(MARKER)
    if writer is not None and any(a.name == writer and a.state == "ready" for a in sim.scheduler.actors):
        return
    keys = {ring.current, *(new for _, new in ring.tried)}
    results = {k: _unwraps(sim.world, ring, k) for k in sorted(keys)}
    if not any(results.values()):
        data = sim.world.blobs.get(MARKER)
        shown = base64.b64encode(data.data[:40]).decode() if data is not None else "none"
        raise Violation("marker", f"no key opens the repository marker (keys tried: "
                                  f"{', '.join(f'k{k}' for k in sorted(keys))}; marker "
                                  f"{'unreadable' if None in results.values() else 'holds another key'}, "
                                  f"{len(data.data) if data else 0} bytes, starts {shown})")


def final(sim: Simulation) -> None:
    """At the end: every key a rotation reported (exit 0) opens the repository, unless a later rotation from it was
    interrupted after its write and its new key opens it; then the operator finishes what was interrupted, as he
    would: the rotation to the last key he tried, from whichever of his keys opens the repository now, exits 0 and
    leaves that key opening it."""
    ring: KeyRing | None = getattr(sim, "keyring", None)
    if ring is None:
        return
    live = {new for _, new in ring.rotated} - {old for old, _ in ring.rotated}
    unfinished = [pair for pair in ring.tried if pair not in ring.rotated]
    lost = sorted(k for k in live if not _opens(sim.world, ring, k)
                  and not any(old == k and _opens(sim.world, ring, new) for old, new in unfinished))
    if lost:
        raise Violation("key", f"keys {', '.join(f'k{k}' for k in lost)} were reported by rotations that exited 0 and "
                               f"no longer open the repository (rotations that exited 0: {ring.rotated}; started: "
                               f"{ring.tried}; {_written(ring)})")
    check(sim)
    if not unfinished:
        return
    to = unfinished[-1][1]
    opening = next(k for k in sorted({ring.current, *(new for _, new in ring.tried)}) if _opens(sim.world, ring, k))
    try:
        rotate_data_key(sim.store, SIM_URL, ring.config(opening), ring.config(to))
    except BlobstateError as exc:
        raise Violation("key", f"the operator's rerun of the rotation k{opening} -> k{to} failed: {exc}") from exc
    if not _opens(sim.world, ring, to):
        raise Violation("key", f"the operator's rerun of the rotation to k{to} exited 0 and k{to} does not open")
