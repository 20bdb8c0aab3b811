"""A key-grouped partition's view for ``update(db, rows, ctx)``: the user's keys in and out, each stored behind its
key group (``blobstate.model.keygroups.prefix``), so that a later rescale cuts the partition by ranges of keys.

The stored key of a user key ``k`` is ``prefix(g) + encode(k)``: ``g`` the key group Spark's hash of ``k``'s key
columns gives (``key_of(k)``, typed as the key columns are: ``blobstate.spark.executor.spark_hash``, the hash the
JVM routed the rows by), ``encode`` rocksdict's own encoding of a key (``blobstate.worker.entries``), so the stored
key is ``bytes`` and gives ``k`` back. A key whose group lies outside the task's range is refused
(``ConfigurationError``, nothing staged): its row was routed elsewhere, so ``key_of`` or the key column types do not
match the partitioning, and writing it here would put it where a rescale cuts it away.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from blobstate.errors import ConfigurationError
from blobstate.model.changelog import Op, StagedWrites
from blobstate.model.keygroups import KEY_GROUP_BYTES, KeyGroupRange, key_group_of_hash, prefix
from blobstate.spark.executor.spark_hash import check_types, spark_hash
from blobstate.worker import entries

KeyOf = Callable[[Any], Sequence[Any]]


def default_key_of(key: Any) -> Sequence[Any]:
    """A key that is its one key column's value: ``(key,)``."""
    return (key,)


class KeyGroupedWrites:
    """``StagedWrites``' dict-style API (``get``, ``[]``, ``in``, ``put``, ``delete``, ``get_many``, ``put_many``,
    ``items``, ``ops``) over ``staged``, with every user key stored behind its key group: ``key_groups`` in all,
    this partition's range ``keep``, ``key_of(key)`` the key column values of a stored key, of Spark types
    ``key_types``. Raises ``ConfigurationError`` for a key of a key group outside ``keep`` and for key column types
    the hash does not take."""

    def __init__(self, staged: StagedWrites, *, key_groups: int, keep: KeyGroupRange, key_types: Sequence[str],
                 key_of: KeyOf | None = None) -> None:
        check_types(key_types)
        self.staged, self.key_groups, self.keep = staged, key_groups, keep
        self.key_types, self.key_of = tuple(key_types), key_of or default_key_of

    def key_group(self, key: Any) -> int:
        """The key group of user key ``key``."""
        return key_group_of_hash(spark_hash(tuple(self.key_of(key)), self.key_types), self.key_groups)

    def stored(self, key: Any) -> bytes:
        """The stored key of user key ``key``; ``ConfigurationError`` when its key group is outside ``keep``."""
        group = self.key_group(key)
        if group not in self.keep:
            raise ConfigurationError(
                f"the key {key!r:.100} is of key group {group}, outside this partition's key groups {self.keep}: "
                "key_of or the key column types do not match how Spark routed its row; nothing was staged")
        return prefix(group) + entries.encode(key)

    @staticmethod
    def user_key(stored: bytes) -> Any:
        """The user key of a stored key."""
        return entries.decode(stored[KEY_GROUP_BYTES:])

    def get(self, key: Any, default: Any = None) -> Any:
        return self.staged.get(self.stored(key), default)

    def __getitem__(self, key: Any) -> Any:
        return self.staged[self.stored(key)]

    def __contains__(self, key: object) -> bool:
        return self.stored(key) in self.staged

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.delete(key)

    def put(self, key: Any, value: Any) -> None:
        self.staged.put(self.stored(key), value)

    def delete(self, key: Any) -> None:
        self.staged.delete(self.stored(key))

    def get_many(self, keys: Iterable[Any], default: Any = None) -> list[Any]:
        return self.staged.get_many([self.stored(k) for k in keys], default)

    def put_many(self, items: Iterable[tuple[Any, Any]]) -> None:
        self.staged.put_many([(self.stored(k), v) for k, v in items])

    def items(self) -> Iterator[tuple[Any, Any]]:
        """The partition's entries with this batch's writes, by user key (in stored order)."""
        for stored, value in self.staged.items():
            yield self.user_key(stored), value

    def __len__(self) -> int:
        return len(self.staged)

    def ops(self) -> list[Op]:
        """The staged writes as changelog ops, by stored key."""
        return self.staged.ops()


__all__ = ["KeyGroupedWrites", "KeyOf", "default_key_of"]
