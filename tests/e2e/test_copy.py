"""``blobstate copy``: checkpoints replicated into another repository (file:// to moto S3, moto to azurite),
uploading only what the target lacks, verified, resumable after a SIGKILL and idempotent: the target's every
checkpoint verifies and restores byte-equal, keeps the source's checkpoint and batch ids, and a rerun with
nothing new uploads nothing (PUTs counted at the server)."""

from __future__ import annotations

import os

import pytest
from counting_proxy import CountingProxy
from fixtures_core import read_all, run_cli, tree_digest

from blobstate import api
from blobstate.repository.repo import Repository


def _source(tmp_path, url, n=3, **kw):
    """``n`` backups of a dir store (a file of three chunks among them); returns ``{checkpoint id: digest}``."""
    src = tmp_path / "counts"
    src.mkdir()
    states = {}
    for i in range(n):
        (src / f"own-{i}").write_bytes(os.urandom(1000 + i))
        (src / "big").write_bytes(os.urandom(10_000) if i == 0 else (src / "big").read_bytes())
        result = api.backup(str(src), repo=url, store_type="dir", retain=10, chunk_size=4096, batch_id=10 + i, **kw)
        states[result.checkpoint.checkpoint_id] = tree_digest(src)
    return states


def _check_target(tmp_path, url, states, options=None):
    """Every checkpoint of the target verifies and restores byte-equal; ids and batch ids are the source's."""
    with Repository.open(url, storage_options=options, create=False) as repo:
        key = repo.log.keys()[0]
        history = repo.log.history(key)
    assert [cp.checkpoint_id for cp in history] == list(states)  # in order, none twice
    assert [cp.batch_id for cp in history] == [10 + i for i in range(len(states))]
    api.verify(repo=url, store=key.store, all_checkpoints=True, storage_options=options)
    for cid, digest in states.items():
        dest = tmp_path / f"restored-{abs(hash(url))}-{cid}"
        api.restore(str(dest), repo=url, store=key.store, checkpoint=cid, store_type="dir", cleanup=False,
                    storage_options=options, work_base=str(tmp_path / "restore-host"))
        assert tree_digest(dest) == digest


def test_a_copy_to_s3_then_to_azure_uploads_only_what_is_missing(tmp_path, work_base, moto_server, s3_target,
                                                                 azure_target):
    url = f"file://{tmp_path}/repo"
    states = _source(tmp_path, url, n=2)
    s3 = {**s3_target.storage_options, "skip_instance_cache": True}
    (report,) = api.copy(source=url, target=s3_target.url, target_options=s3)
    assert report.copied == list(states) and report.blobs_present > 0  # the second shares the big file
    with CountingProxy(moto_server.endpoint) as proxy:  # a rerun: nothing new, nothing uploaded
        proxied = {**s3, "endpoint_url": proxy.endpoint}
        (again,) = api.copy(source=url, target=s3_target.url, target_options=proxied)
        assert again.copied == [] and again.present == list(states)
        assert proxy.count("PUT") == 0 and proxy.count("POST") == 0 and proxy.count("DELETE") == 0, proxy.requests
    (to_azure,) = api.copy(source=s3_target.url, target=azure_target.url, source_options=s3,
                           target_options=azure_target.storage_options)
    assert to_azure.copied == list(states)
    _check_target(tmp_path, s3_target.url, states, s3)
    _check_target(tmp_path, azure_target.url, states, azure_target.storage_options)


@pytest.mark.parametrize("kill_at", ["BlobUploaded:4", "CheckpointWritten:2"])
def test_a_copy_killed_midway_and_rerun_gives_a_target_that_restores_every_checkpoint(tmp_path, work_base,
                                                                                     kill_at):
    url = f"file://{tmp_path}/repo"
    target = f"file://{tmp_path}/copy"
    states = _source(tmp_path, url)
    killed = run_cli("copy", "--from", url, "--to", target, work_base=work_base,
                     env={"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": kill_at})
    assert killed.returncode == -9, killed.stderr
    with Repository.open(target, create=False) as repo:
        landed = repo.log.history(repo.log.keys()[0]) if repo.log.keys() else []
    assert len(landed) < len(states)
    rerun = run_cli("copy", "--from", url, "--to", target, "--json", work_base=work_base)
    assert rerun.returncode == 0, rerun.stderr
    (report,) = rerun.json()
    assert report["present"] + report["copied"] == list(states)
    _check_target(tmp_path, target, states)
    leftovers = {p.name for p in (tmp_path / "copy").rglob("*") if p.is_file() and "/ttl/" in str(p)}
    assert not leftovers, leftovers  # every copied object made permanent, the killed attempt's cleaned up


def test_a_partitioned_store_is_copied_group_by_group_and_every_partition_restores(tmp_path, work_base):
    """Group records (a partitioned store's): every part of each group (changelogs, a partition's snapshot index
    and its blobs) is at the target before the group record lands, and each partition restores the same state."""
    from rocksdict import Rdict

    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.group import GroupCommitter
    from blobstate.model import changelog
    from blobstate.model.records import StoreKey
    from blobstate.repository.backends import open_local_store
    from blobstate.restoring import chain as replay
    from blobstate.worker import stage_changelog, stage_snapshot

    key, n, ttl = StoreKey("flights", "group", "routes"), 2, 60_000
    url, target = f"file://{tmp_path}/repo", f"file://{tmp_path}/copy"
    repo = Repository.open(url, create=True)
    db = Rdict(str(tmp_path / "p0-db"))
    db["route/JFK-LAX"] = b"7"
    db.flush(True)
    open_local_store("rocksdb").create_checkpoint(db, str(tmp_path / "p0-ck"))
    db.close()
    with StoreCommitter(key, repo, work_dir=str(tmp_path / "driver"), ttl_ms=ttl) as committer:
        groups = GroupCommitter(committer, num_partitions=n)
        for batch in range(3):
            parts = [stage_changelog(repo, key, partition=p, batch_id=batch, ttl_ms=ttl, base=batch, attempt=0,
                                     data=changelog.encode([(changelog.PUT, f"k{p}", f"{batch}".encode())]))
                     for p in range(n)]
            snap = [] if batch != 1 else [stage_snapshot(repo, key, partition=0, batch_id=0, previous=None,
                                                         ttl_ms=ttl, checkpoint_dir=str(tmp_path / "p0-ck"))]
            groups.commit(parts + [s.entry for s in snap], batch_id=batch, query_id="q",
                          new_blob_ids=[b for s in snap for b in s.new_blob_ids])
    (report,) = api.copy(source=url, target=target)
    assert len(report.copied) == 3 and report.blobs_uploaded >= 3 * n + 2
    with Repository.open(target, create=False) as copy:
        assert [cp.checkpoint_id for cp in copy.log.history(key)] == [cp.checkpoint_id for cp in
                                                                       repo.log.history(key)]
        for p in range(n):
            restored = []
            for source in (repo, copy):
                dest = str(tmp_path / f"p{p}-{len(restored)}")
                replay.restore_chain(source, replay.plan(source, key, partition=p), dest,
                                     local_store=open_local_store("rocksdb"), store_type="rocksdb", force=True)
                restored.append(read_all(dest))
            assert restored[0] == restored[1] and restored[0]
    api.verify(repo=target, job=key.job, task=key.task, store=key.store)
    repo.close()


@pytest.mark.parametrize("encrypted", [False, True], ids=["compressed", "encrypted-two-keys"])
def test_a_copy_stores_every_blob_as_its_index_says_and_under_the_targets_key(tmp_path, work_base, monkeypatch,
                                                                              encrypted):
    """Data blobs stored compressed (index entries ``codec: zstd``) beside plain ones are copied as the copied
    index records them; between two encrypted repositories with different keys (``--from-key-file``,
    ``--to-key-file``) every object is opened with the source's key and sealed with the target's: the target
    verifies, restores byte-equal, opens with its own key only, and holds no plaintext."""
    from blobstate.codec.keys import KeyConfig
    from blobstate.errors import EncryptionKeyError

    url, target = f"file://{tmp_path}/repo", f"file://{tmp_path}/copy"
    keys = {side: tmp_path / f"{side}.key" for side in ("source", "target")}
    for path in keys.values():
        path.write_bytes(os.urandom(32))
        path.chmod(0o600)
    if encrypted:  # the first backup with a key creates the source encrypted
        monkeypatch.setenv("BLOBSTATE_KEY_FILE", str(keys["source"]))
    src = tmp_path / "counts"
    src.mkdir()
    states = {}
    for i in range(2):
        (src / f"log-{i}").write_bytes(b"".join(b"route-%06d=%d\n" % (n, i) for n in range(3000)))  # compresses
        (src / f"random-{i}").write_bytes(os.urandom(3000))
        result = api.backup(str(src), repo=url, store_type="dir", retain=10, chunk_size=16384, batch_id=10 + i)
        states[result.checkpoint.checkpoint_id] = tree_digest(src)
    with Repository.open(url, create=False) as repo:
        index = repo.read_index(repo.log.latest(repo.log.keys()[0]))
    assert {b.codec for f in index.files().values() for b in f.blobs} == {"zstd", None}
    if encrypted:
        monkeypatch.delenv("BLOBSTATE_KEY_FILE")
        copied = run_cli("copy", "--from", url, "--to", target, "--from-key-file", keys["source"],
                         "--to-key-file", keys["target"], "--json", work_base=work_base)
        assert copied.returncode == 0, copied.stderr
        assert copied.json()[0]["copied"] == list(states)
        monkeypatch.setenv("BLOBSTATE_KEY_FILE", str(keys["target"]))
    else:
        (report,) = api.copy(source=url, target=target)
        assert report.copied == list(states)
    _check_target(tmp_path, target, states)
    if encrypted:
        with pytest.raises(EncryptionKeyError):
            Repository.open(target, create=False, key_config=KeyConfig(key_file=str(keys["source"])))
        stored = [p.read_bytes() for p in (tmp_path / "copy").rglob("*") if p.is_file()]
        assert stored and not [data for data in stored if b"route-000001" in data]


def test_a_copy_counts_only_what_a_record_references_or_no_ttl_marks_and_puts_back_what_goes_before_its_append(
        tmp_path, work_base):
    """Issue 39 case 3 in one process: what the target's listing shows counts as held only when a retained target
    record references it or it carries no TTL mark (``StoreCopier.held``); and whatever a counted object meets
    before the append (here: deleted right before it), the heal check after the append puts it back from the
    source (``StoreCopier.heal``), so every checkpoint at the target restores."""
    from blobstate.commit.copy import CopyReport, StoreCopier
    from blobstate.plugin.interfaces import PutRequest
    from blobstate.repository.repo import declared

    url, target = f"file://{tmp_path}/repo", f"file://{tmp_path}/copy"
    states = _source(tmp_path, url, n=2)  # the second reuses the first's "big" file
    src, dst = Repository.open(url, create=False), Repository.open(target, create=True)
    key = src.log.keys()[0]
    first, second = src.log.history(key)
    copier = StoreCopier(key, src, dst, work_dir=str(tmp_path / "work"), ttl_ms=60_000)
    try:
        copier.copy([first], CopyReport(key))
        shared = sorted(src.read_index(first).referenced_blob_ids() & src.read_index(second).referenced_blob_ids())
        new = sorted(src.read_index(second).referenced_blob_ids() - src.read_index(first).referenced_blob_ids())
        leftover, orphan = new[0], second.index_blob_id  # as another copy left them: under a lease, and without
        dst.store.put(PutRequest(leftover, b"a killed copy's bytes", 60_000))
        dst.store.put(PutRequest(orphan, src.store.get_bounded(orphan, declared(second.index_size, "index"))))
        copier.present = {i.blob_id for i in dst.store.list(key.prefix)}
        copier.mine = set()
        held = copier.held(set(shared) | {leftover, orphan})
        assert held == set(shared) | {orphan}  # referenced by the first record, or unmarked; never the leftover

        append = copier.committer.engine.append

        def lose_then_append(record, **kw):  # noqa: ANN001, ANN003, ANN202 - a gc that acted before the append
            dst.store.delete(shared[0])
            return append(record, **kw)

        copier.committer.engine.append = lose_then_append
        report = CopyReport(key)
        copier.copy([second], report)
        assert leftover in {i.blob_id for i in dst.store.list(key.prefix)} and report.blobs_uploaded >= 2
    finally:
        copier.close()
        src.close()
        dst.close()
    _check_target(tmp_path, target, states)


def test_a_source_keeping_one_checkpoint_is_copied_however_often_it_pruned_and_the_target_follows_it(tmp_path):
    """A ``--retain 1`` source shares no checkpoint with its copy after its next backup (it pruned the one copied):
    the copy goes on because the target's newest record is one a copy appended (its writer id marked,
    ``blobstate.commit.copy:copied_by``), however many backups the source made in between; the target restores the
    source's newest each time, and its records carry the mark."""
    src, dst, data = f"file://{tmp_path}/src", f"file://{tmp_path}/dst", tmp_path / "counts"
    data.mkdir()
    for i in range(3):
        for _ in range(i + 1):  # 1, 2, then 3 backups between two copies
            (data / "state").write_bytes(os.urandom(2000))
            made = api.backup(str(data), repo=src, store_type="dir", retain=1, store="counts",
                              work_base=str(tmp_path / "a"))
        [report] = api.copy(source=src, target=dst, work_base=str(tmp_path / "c"))
        assert report.copied == [made.checkpoint.checkpoint_id]
        dest = tmp_path / f"restored-{i}"
        api.restore(str(dest), repo=dst, store="counts", store_type="dir", cleanup=False,
                    work_base=str(tmp_path / "d"))
        assert tree_digest(dest) == tree_digest(data)
    with Repository.open(dst, create=False) as repo:
        [latest] = repo.log.history(repo.log.keys()[0])
    assert latest.writer_id == "blobstate-copy:" + made.checkpoint.writer_id
