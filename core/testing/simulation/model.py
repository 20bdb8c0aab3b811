"""The reference model: what the state of a store is after each batch, and what a restore of it must give.

A store's state is a small key-value map materialised as a directory (one file per key, a ``dir`` store). The
writes of batch ``b`` of a store (or of one partition) are a pure function of its name and ``b``, like a Spark
micro-batch that is recomputed identically when it is re-run: so any writer that commits batch ``b`` (the first
one, a zombie, a second writer that took over, a retried partition task) commits the same state ``state(b)``, and
a checkpoint of batch ``b`` must restore to exactly ``state(b)``.

The partitions of a partitioned store hold disjoint keys (partition ``p``'s are ``p<p>.k<i>``), as Spark's hash
partitioning of the key columns gives them; so the state of the whole store is their union, and re-partitioning it
into ``m`` partitions (``rescaled``: key ``k`` goes to ``new_partition(k, m)``, the rescale's pure key mapping)
gives partitions whose writes per batch are the source partitions' writes of their keys.
"""

from __future__ import annotations

import os
import random
import re
import zlib
from functools import lru_cache

from blobstate.model import changelog
from blobstate.model.changelog import DELETE, PUT, Op

KEYS = 6


def run_name(name: str, lineage: str) -> str:
    """The model name of the state of store ``name`` in the run ``lineage`` of its query (``""``: the first run):
    a run begun after a reset of the engine's checkpoint computes another state from batch 0 on."""
    return f"{name}@{lineage}" if lineage else name


def chain_name(name: str, records: list | tuple) -> str:
    """The model name of the state a chain of ``records`` (snapshot, then deltas) of store ``name`` restores: the
    run of its records (those that name none belong to every run)."""
    return run_name(name, next((r.lineage_id for r in reversed(records) if r.lineage_id), ""))


def ops(name: str, batch: int) -> list[Op]:
    """Batch ``batch``'s writes to store (or partition) ``name``: a few puts and sometimes a delete; of a
    ``rescaled`` partition, the writes of its keys in every source partition."""
    source = _rescaled_source(name)
    if source is not None:
        store, n, m, q = source
        return [op for p in range(n) for op in ops(f"{store}/p{p}", batch) if new_partition(str(op[1]), m) == q]
    rng = random.Random(zlib.crc32(f"{name}/{batch}".encode()))
    prefix = _key_prefix(name)
    out: list[Op] = [(PUT, f"{prefix}k0", f"{name}:{batch}")]
    for _ in range(rng.randint(1, 2)):
        out.append((PUT, f"{prefix}k{rng.randrange(1, KEYS)}", f"{batch}-{rng.getrandbits(24):06x}"))
    if rng.random() < 0.3:
        out.append((DELETE, f"{prefix}k{rng.randrange(1, KEYS)}", None))
    return out


_PARTITION = re.compile(r"/(p\d+)(?:@|$)")
_RESCALED = re.compile(r"^(.*)%(\d+)>(\d+)/p(\d+)$")


def _key_prefix(name: str) -> str:
    """``p<p>.`` for partition ``p`` of a partitioned store (its keys are its own), else nothing."""
    found = _PARTITION.search(name)
    return f"{found.group(1)}." if found else ""


def rescaled(store: str, n: int, m: int) -> str:
    """The model name of partitioned store ``store`` (``n`` partitions) re-partitioned into ``m``: partition ``q``
    of it is ``<name>/p<q>``."""
    return f"{store}%{n}>{m}"


def _rescaled_source(name: str) -> tuple[str, int, int, int] | None:
    found = _RESCALED.match(name)
    if found is None:
        return None
    return found.group(1), int(found.group(2)), int(found.group(3)), int(found.group(4))


def new_partition(key: str, m: int) -> int:
    """The rescale's key mapping (pure, as ``key_of`` and Spark's ``pmod(hash(key columns), m)`` are): the new
    partition of stored key ``key`` among ``m``."""
    return zlib.crc32(key.encode()) % m


def apply(state: dict[str, str], batch_ops: list[Op]) -> dict[str, str]:
    out = dict(state)
    for op, key, value in batch_ops:
        if op == PUT:
            out[str(key)] = str(value)
        else:
            out.pop(str(key), None)
    return out


@lru_cache(maxsize=4096)
def _state(name: str, batch: int) -> tuple[tuple[str, str], ...]:
    prev = dict(_state(name, batch - 1)) if batch > 0 else {}
    return tuple(sorted(apply(prev, ops(name, batch)).items()))


def state(name: str, batch: int) -> dict[str, str]:
    """The state of ``name`` after batch ``batch`` (-1: empty)."""
    return dict(_state(name, batch)) if batch >= 0 else {}


def encoded(name: str, batch: int) -> bytes:
    """Batch ``batch``'s changelog blob (``blobstate.model.changelog``)."""
    return changelog.encode(ops(name, batch))


def write_dir(path: str, values: dict[str, str]) -> None:
    """Make directory ``path`` hold exactly ``values`` (one file per key)."""
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        if name not in values:
            os.remove(os.path.join(path, name))
    for name, value in values.items():
        with open(os.path.join(path, name), "w", encoding="utf-8") as fh:
            fh.write(value)


def read_dir(path: str) -> dict[str, str]:
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), encoding="utf-8") as fh:
            out[name] = fh.read()
    return out


def replay(values: dict[str, str], data: bytes, source: str) -> dict[str, str]:
    """``values`` with a changelog blob applied (decoded by the real decoder, which checks it)."""
    return apply(values, changelog.decode(data, source=source))
