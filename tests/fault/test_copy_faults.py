"""Issue 39 cases 3 and 10: ``blobstate copy`` killed, then rerun, with real processes on file://.

- case 3: a copy killed after its uploads leaves objects under TTL at the target; a rerun from another host after
  their TTL, with a gc between its listing and its append, must not count them as present (they are nobody's:
  no retained target record references them and they carry a TTL mark): it uploads them again, and checks what
  its record references after the append, so the target restores.
- case 10: a copy killed between two encrypted repositories leaves its staged chunks in the work directory; they
  hold no plaintext of the source, and the rerun sweeps them.
"""

from __future__ import annotations

import os
import time

from fault_harness import pause_env, resume, start_cli, wait_stopped
from fixtures_core import run_cli, tree_digest

from blobstate import api
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

MARK = b"route-000123"  # plaintext only the source's one file holds


def _source(tmp_path, url, **kw) -> tuple[str, StoreKey]:
    """One backup of a dir store: a file of eight chunks (``MARK`` inside) and a small one; returns its digest and
    key."""
    src = tmp_path / "counts"
    src.mkdir()
    (src / "routes").write_bytes(b"".join(b"route-%06d=%d\n" % (n, n % 7) for n in range(2400)))
    (src / "small").write_bytes(os.urandom(300))
    result = api.backup(str(src), repo=url, store_type="dir", retain=10, chunk_size=4096, batch_id=1, **kw)
    return tree_digest(src), result.checkpoint.store_key


def _expired_at_target(url: str, key: StoreKey) -> list[str]:
    with Repository.open(url, create=False) as repo:
        return repo.store.expired(key.prefix, int(time.time() * 1000))


def test_a_copy_rerun_from_another_host_never_counts_another_copys_expired_leftovers(tmp_path):
    url, target = f"file://{tmp_path}/repo", f"file://{tmp_path}/copy"
    _, key = _source(tmp_path, url)
    first = run_cli("copy", "--from", url, "--to", target, work_base=tmp_path / "host-a")
    assert first.returncode == 0, first.stderr  # the target holds the first checkpoint
    (tmp_path / "counts" / "routes").write_bytes(b"".join(b"route-%06d=%d\n" % (n, n % 5) for n in range(2400)))
    digest = tree_digest(tmp_path / "counts")
    api.backup(str(tmp_path / "counts"), repo=url, store_type="dir", retain=10, chunk_size=4096, batch_id=2)
    killed = run_cli("copy", "--from", url, "--to", target, "--ttl", "2s", work_base=tmp_path / "host-a",
                     env={"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "IndexUploaded"})
    assert killed.returncode == -9, killed.stderr  # every object uploaded under a TTL of 2 s, nothing appended
    with Repository.open(target, create=False) as repo:
        left = {i.blob_id for i in repo.store.list(key.prefix)} - repo.retained_references(repo.log.history(key))
    assert len(left) >= 9, left
    deadline = time.monotonic() + 60
    while set(_expired_at_target(target, key)) != left and time.monotonic() < deadline:
        time.sleep(0.1)  # until every leftover's lease says expired (real time: the condition, polled)
    assert set(_expired_at_target(target, key)) == left
    clock = tmp_path / "clock"
    rerun = start_cli("copy", "--from", url, "--to", target, "--json", work_base=tmp_path / "host-b",
                      env=pause_env("UploadsPlanned", clock))
    wait_stopped(rerun)  # it listed the target and planned: past its decision of what is there
    gc = run_cli("gc", "--repo", target, "--json", work_base=tmp_path / "host-c")
    assert gc.returncode == 0, gc.stderr
    assert set(gc.json()[0]["expiredDeleted"]) == left, gc.stdout  # the killed copy's leftovers go
    done = resume(rerun, clock_file=clock, advance_ms=0)
    assert done.returncode == 0, done.stderr
    (report,) = done.json()
    assert report["copied"] and report["blobsUploaded"] >= len(left), report
    verified = run_cli("verify", "--repo", target, "--job", key.job, "--task", key.task, "--store", key.store,
                       "--all", work_base=tmp_path / "host-c")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    api.restore(str(tmp_path / "restored"), repo=target, store=key.store, store_type="dir", cleanup=False,
                work_base=str(tmp_path / "host-d"))
    assert tree_digest(tmp_path / "restored") == digest


def test_a_copy_killed_between_encrypted_repositories_leaves_no_plaintext_and_the_rerun_sweeps_its_staging(
        tmp_path, monkeypatch):
    url, target = f"file://{tmp_path}/repo", f"file://{tmp_path}/copy"
    keys = {side: tmp_path / f"{side}.key" for side in ("source", "target")}
    for path in keys.values():
        path.write_bytes(os.urandom(32))
        path.chmod(0o600)
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", str(keys["source"]))  # the first backup with a key encrypts
    digest, key = _source(tmp_path, url)
    monkeypatch.delenv("BLOBSTATE_KEY_FILE")
    args = ["copy", "--from", url, "--to", target, "--from-key-file", keys["source"], "--to-key-file",
            keys["target"]]
    host = tmp_path / "host"
    # the index is one upload, the eight chunks of the file the others: at the second, every chunk is staged
    killed = run_cli(*args, work_base=host, env={"BLOBSTATE_PLUGINS": "kill_plugin",
                                                 "BLOBSTATE_TEST_KILL_AT": "BlobUploaded:2"})
    assert killed.returncode == -9, killed.stderr
    staged = [p for p in host.rglob("*") if p.is_file() and "copy-" in str(p.relative_to(host))
              and not p.name.endswith(".held")]
    assert len(staged) >= 2, "the killed copy left no staged chunks (nothing to check)"
    on_disk = [p for p in host.rglob("*") if p.is_file() and MARK in p.read_bytes()]
    assert not on_disk, f"plaintext of the encrypted source on disk: {on_disk}"
    rerun = run_cli(*args, "--json", work_base=host)
    assert rerun.returncode == 0, rerun.stderr
    assert not [p for p in host.rglob("copy-*") if p.exists()], "the rerun left the killed copy's staging"
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", str(keys["target"]))
    api.verify(repo=target, store=key.store, all_checkpoints=True)
    api.restore(str(tmp_path / "restored"), repo=target, store=key.store, store_type="dir", cleanup=False,
                work_base=str(tmp_path / "host-d"))
    assert tree_digest(tmp_path / "restored") == digest


def test_a_copy_plans_from_the_view_its_committer_pinned_so_a_rival_copy_in_between_never_doubles_a_record(
        tmp_path, monkeypatch):
    """Two copies to one target: the rival commits the missing records after this copy decided what the target lacks
    and before its committer pinned the target's generation. Planned first and pinned last, this copy would append the
    same records again on top of the rival's (two records of one checkpoint, each a delta of the chain); through
    the Open door (``blobstate.commit.opening.open_store``: pin, then plan from that view) it is fenced instead, and
    the target holds each checkpoint once and restores the source's state."""
    from blobstate.commit import copy as copy_module
    from blobstate.errors import FencedError

    url, target = f"file://{tmp_path}/repo", f"file://{tmp_path}/copy"
    digest, key = _source(tmp_path, url)
    plan, rival_ran = copy_module.to_copy, []

    def plan_then_rival(source, held, upto=None, **evidence):
        planned = plan(source, held, upto, **evidence)
        if not rival_ran:
            rival_ran.append(True)
            with Repository.open(url, create=False) as src, Repository.open(target, create=False) as dst:
                copy_module.copy_stores(src, dst, [key], checkpoint=None, ttl_ms=60_000, max_concurrency=2,
                                        work_base=str(tmp_path / "host-b"))
        return planned

    monkeypatch.setattr(copy_module, "to_copy", plan_then_rival)
    fenced = None
    with Repository.open(url, create=False) as src, Repository.open(target, create=True) as dst:
        try:
            copy_module.copy_stores(src, dst, [key], checkpoint=None, ttl_ms=60_000, max_concurrency=2,
                                    work_base=str(tmp_path / "host-a"))
        except FencedError as exc:
            fenced = exc
    assert rival_ran
    with Repository.open(target, create=False) as dst:
        ids = [cp.checkpoint_id for cp in dst.log.history(key)]
    assert len(ids) == len(set(ids)), ids  # never one checkpoint twice
    assert fenced is not None or len(ids) == 1
    api.restore(str(tmp_path / "restored"), repo=target, store=key.store, store_type="dir", cleanup=False,
                work_base=str(tmp_path / "host-d"))
    assert tree_digest(tmp_path / "restored") == digest
