"""A new partition built from old partitions' real RocksDB copies after a rescale
(``blobstate.spark.partitioned.executor.keygroup_cut``): 4 -> 8 (each new partition its base's copy cut by
``delete_range``, no key copied), 8 -> 3 and 3 -> 5 (a base cut, the other sources' key groups ingested as one SST
each). Exact against the fold of what was written: every key/value once, in the partition whose range holds it, a
count and a checksum of every key and value the same."""

from __future__ import annotations

import hashlib
import os
import random
import shutil

import pytest

from blobstate.model.keygroups import key_group_range, partition_of_key_group, plan_rescale, prefix
from blobstate.spark.errors import KeyGroupError
from blobstate.spark.executor.open_partitions import db_options
from blobstate.spark.partitioned.executor.keygroup_cut import build_partition, cut_to

K = 128


def _state(seed: int, keys: int = 3000) -> dict[bytes, object]:
    """The fold of the input: key (key-group prefix + payload) -> its final value, of every type a store holds."""
    rng = random.Random(seed)
    kinds = [lambda i: f"v{i}", lambda i: i * 7919 - 10**12, lambda i: i / 3, lambda i: i % 2 == 0,
             lambda i: bytes([i % 256]) * (i % 5)]
    return {prefix(rng.randrange(K)) + f"k{i}".encode(): kinds[i % len(kinds)](i) for i in range(keys)}


def _write_old(root, state, n: int) -> list[str]:
    from rocksdict import Rdict

    paths = []
    for p in range(n):
        path = str(root / f"old{n}-{p}")
        db = Rdict(path, db_options())
        for key, value in state.items():
            if partition_of_key_group(int.from_bytes(key[:2], "big"), K, n) == p:
                db[key] = value
        db.close()
        paths.append(path)
    return paths


def _rescale(root, old_paths: list[str], m: int) -> tuple[list[dict[bytes, object]], list]:
    from rocksdict import AccessType, Rdict

    n = len(old_paths)
    out, built = [], []
    for plan in plan_rescale(K, n, m):
        path = str(root / f"new{n}to{m}-{plan.partition}")
        shutil.copytree(old_paths[plan.base.partition], path)  # the base's copy, as a restore leaves it: files
        db = Rdict(path, db_options())
        sources = {s.partition: Rdict(old_paths[s.partition], access_type=AccessType.read_only())
                   for s in plan.others}
        try:
            built.append(build_partition(db, plan, sources, K, str(root)))
            out.append({k: v for k, v in db.items()})
        finally:
            for s in sources.values():
                s.close()
            db.close()
    return out, built


def _digest(items) -> tuple[int, str]:
    h = hashlib.sha256()
    count = 0
    for key, value in sorted(items, key=lambda kv: kv[0]):
        h.update(repr((key, type(value).__name__, value)).encode())
        count += 1
    return count, h.hexdigest()


@pytest.mark.parametrize(("n", "m"), [(4, 8), (8, 3), (3, 5), (5, 5), (1, 4), (4, 1)])
def test_a_rescaled_group_holds_exactly_the_folded_state_each_key_where_its_range_is(tmp_path, n, m):
    state = _state(n * 100 + m)
    new, built = _rescale(tmp_path, _write_old(tmp_path, state, n), m)
    for q, held in enumerate(new):
        r = key_group_range(K, m, q)
        assert all(int.from_bytes(key[:2], "big") in r for key in held), f"partition {q} holds another range"
    merged = [kv for held in new for kv in held.items()]
    assert _digest(merged) == _digest(state.items())  # count and checksum of every key and value
    assert len(merged) == len({k for k, _ in merged})  # no key twice
    if m % n == 0:  # scale-out: each new partition is its base cut; no key read or written
        assert all(b.taken == 0 and len(b.sources) == 1 for b in built)
    for b, plan in zip(built, plan_rescale(K, n, m), strict=True):  # only the other sources' key groups are copied
        assert b.taken == sum(1 for k in state if any(int.from_bytes(k[:2], "big") in s.keep for s in plan.others))


def test_a_copy_holding_a_key_of_no_key_group_is_not_cut(tmp_path):
    from rocksdict import Rdict

    db = Rdict(str(tmp_path / "db"), db_options())
    db[prefix(3) + b"a"] = 1
    db[prefix(100) + b"b"] = 2
    db["plain"] = 3  # not a key-group key: a cut would lose it
    with pytest.raises(KeyGroupError, match="'plain'"):
        cut_to(db, key_group_range(K, 2, 0), K)
    assert len(list(db.keys())) == 3
    del db["plain"]
    db[prefix(K) + b"c"] = 4  # a key group beyond the store's
    with pytest.raises(KeyGroupError):
        cut_to(db, key_group_range(K, 2, 0), K)
    del db[prefix(K) + b"c"]
    assert cut_to(db, key_group_range(K, 2, 0), K) == 1
    assert list(db.keys()) == [prefix(3) + b"a"]
    db.close()


@pytest.mark.parametrize(("n", "m"), [(4, 8), (8, 3)])
def test_a_restart_plan_restores_the_old_partitions_chains_into_exactly_the_folded_state(tmp_path, n, m):
    """Real groups on a file:// repository (N partitions, key-grouped, three batches of changelogs with puts and
    deletes, one partition snapshot between them), then ``plan_regroup`` and ``restore_regrouped`` per new
    partition: the M copies hold the fold of every batch, each key once, in its range."""
    from rocksdict import Rdict

    from blobstate import worker
    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.group import GroupCommitter
    from blobstate.model import changelog
    from blobstate.model.records import StoreKey
    from blobstate.model.regroup import plan_regroup
    from blobstate.spark.partitioned.executor.keygroup_cut import restore_regrouped

    key = StoreKey("j", "group", f"kg{n}{m}")
    repo = worker.open_repository(f"file://{tmp_path}/repo", create=True)
    rng = random.Random(n * 10 + m)
    fold: dict[bytes, object] = {}
    try:
        with StoreCommitter(key, repo, work_dir=str(tmp_path / "driver"), ttl_ms=600_000) as owner:
            groups = GroupCommitter(owner, num_partitions=n, key_groups=K)
            for batch in range(3):
                ops: dict[int, list] = {p: [] for p in range(n)}
                for i in range(400):
                    k = prefix(rng.randrange(K)) + f"k{rng.randrange(600)}".encode()
                    p = partition_of_key_group(int.from_bytes(k[:2], "big"), K, n)
                    if k in fold and rng.random() < 0.2:
                        ops[p].append((changelog.DELETE, k, None))
                        del fold[k]
                    else:
                        fold[k] = f"b{batch}i{i}"
                        ops[p].append((changelog.PUT, k, fold[k]))
                entries = [worker.stage_changelog(repo, key, partition=p, batch_id=batch,
                                                  data=changelog.encode(ops[p]), ttl_ms=600_000) for p in range(n)]
                groups.commit(entries, batch_id=batch, query_id="q")
        history = repo.log.history(key)
        plan = plan_regroup(history, new_partitions=m, batch=2, what=str(key))
        merged = []
        for part in plan.partitions:
            dest = str(tmp_path / f"new-{part.partition}")
            built = restore_regrouped(repo, part, K, dest, scratch_dir=str(tmp_path / f"scratch-{part.partition}"))
            assert built.sources == tuple(sorted(s.partition for s in (part.base, *part.others)))
            assert built.restore_ms > 0 and built.cut_ms >= 0 and built.take_ms >= 0
            db = Rdict(dest, db_options())
            held = list(db.items())
            db.close()
            assert all(int.from_bytes(k[:2], "big") in part.range for k, _ in held)
            merged += held
            assert not os.path.exists(str(tmp_path / f"scratch-{part.partition}" / "old-0"))
        assert _digest(merged) == _digest(fold.items())
    finally:
        repo.close()
