"""Naming a checkpoint on the command line: ``latest``, a checkpoint id, a unique prefix of one, or a generation.

Git's revision names work the same way (a full id, a unique abbreviation, or a symbolic name): an exact checkpoint
id wins, then ``latest``, then a number that is a retained generation, then a unique prefix of a checkpoint id.
Checkpoint ids start with 13 digits of milliseconds, so a generation number (small) and an id prefix (long) rarely
look alike; when a number is both, the generation wins, and the longer prefix names the checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

from blobstate.errors import ConfigurationError, NothingToRestore
from blobstate.model.layout import GENERATION_DIGITS
from blobstate.model.records import Checkpoint, StoreKey

LATEST = "latest"


def select_checkpoint(history: Sequence[Checkpoint], spec: str | int, key: StoreKey | str = "") -> Checkpoint:
    """The checkpoint of ``history`` (oldest first) that ``spec`` names.

    Raises ``NothingToRestore`` (exit 5) when none matches and ``ConfigurationError`` (exit 2) for an empty spec or
    a prefix that matches several checkpoints (naming them).
    """
    text = str(spec).strip()
    if not text:
        raise ConfigurationError("an empty checkpoint name: give latest, a checkpoint id or prefix, or a generation")
    for cp in history:
        if cp.checkpoint_id == text:
            return cp
    if text == LATEST:
        if history:
            return history[-1]
        raise NothingToRestore(f"no checkpoint for {key}")
    if text.isascii() and text.isdigit() and len(text) <= GENERATION_DIGITS:  # '²' or 5000 digits: no generation
        generation = int(text)
        for cp in history:
            if cp.generation == generation:
                return cp
    matches = [cp for cp in history if cp.checkpoint_id.startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(cp.checkpoint_id for cp in matches[:10])
        raise ConfigurationError(f"checkpoint {text!r} is ambiguous for {key}: it starts {len(matches)} checkpoint "
                                 f"ids ({names}); give more characters or the generation")
    retained = ", ".join(f"{cp.generation}:{cp.checkpoint_id}" for cp in history) or "none"
    raise NothingToRestore(f"no checkpoint {text!r} for {key} (retained generation:id: {retained})")
