"""A key-grouped partition's view (``blobstate.spark.partitioned.executor.keygrouped``) on a real RocksDB: user keys in
and out, each stored behind the key group Spark's hash of its key columns gives; a key of another partition's key
groups refused with nothing staged."""

from __future__ import annotations

import pytest
from rocksdict import Rdict

from blobstate.errors import ConfigurationError
from blobstate.model import changelog
from blobstate.model.keygroups import key_group_of_hash, key_group_range
from blobstate.spark.demo.flights import route_of
from blobstate.spark.executor.spark_hash import spark_hash
from blobstate.spark.partitioned.executor.keygroup_cut import check_key_grouped, cut_to
from blobstate.spark.partitioned.executor.keygrouped import KeyGroupedWrites

K, N, P = 128, 4, 1
KEEP = key_group_range(K, N, P)
TYPES = ("string", "string")


def _group(origin: str, dest: str) -> int:
    return key_group_of_hash(spark_hash([origin, dest], TYPES), K)


ROUTES = [(f"A{i}", f"B{i % 7}") for i in range(300)]
MINE = [f"route/{o}-{d}" for o, d in ROUTES if _group(o, d) in KEEP]
OTHER = next(f"route/{o}-{d}" for o, d in ROUTES if _group(o, d) not in KEEP)


@pytest.fixture
def view(tmp_path):
    db = Rdict(str(tmp_path / "db"))
    yield db, KeyGroupedWrites(changelog.StagedWrites(db), key_groups=K, keep=KEEP, key_types=TYPES, key_of=route_of)
    db.close()


def test_user_keys_go_in_and_come_out_and_are_stored_behind_their_key_group(view):
    db, kg = view
    assert len(MINE) > 20
    for i, key in enumerate(MINE):
        kg[key] = i
    kg.delete(MINE[0])
    assert kg.get(MINE[1]) == 1 and MINE[0] not in kg and kg.get_many(MINE[:3]) == [None, 1, 2]
    for op, stored, value in kg.ops():  # applied as a committed changelog is
        if op == changelog.PUT:
            db[stored] = value
        else:
            db.delete(stored)
    after = KeyGroupedWrites(changelog.StagedWrites(db), key_groups=K, keep=KEEP, key_types=TYPES, key_of=route_of)
    assert dict(after.items()) == {key: i for i, key in enumerate(MINE) if i}
    for stored in db.keys():
        origin, dest = route_of(KeyGroupedWrites.user_key(stored))
        assert int.from_bytes(stored[:2], "big") == _group(origin, dest)
    check_key_grouped(db, K, "the partition")
    assert cut_to(db, KEEP, K) == 2 and dict(after.items()) == {key: i for i, key in enumerate(MINE) if i}


def test_a_key_of_another_partitions_key_groups_is_refused_with_nothing_staged(view):
    _, kg = view
    with pytest.raises(ConfigurationError, match="outside this partition's key groups"):
        kg[OTHER] = 1
    with pytest.raises(ConfigurationError):
        kg.put_many([(MINE[0], 1), (OTHER, 2)])
    assert kg.ops() == []


def test_key_columns_of_a_type_the_hash_does_not_take_are_refused(tmp_path):
    db = Rdict(str(tmp_path / "db"))
    try:
        with pytest.raises(ConfigurationError, match="'double'"):
            KeyGroupedWrites(changelog.StagedWrites(db), key_groups=K, keep=KEEP, key_types=["double"])
    finally:
        db.close()
