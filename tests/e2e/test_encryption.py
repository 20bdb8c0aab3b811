"""Issue 33, client-side encryption on file://, moto S3 and azurite: backup, restore (snapshots and deltas), verify,
list and gc on an encrypted repository; no plaintext of a known state value anywhere in the bucket (blobs, indexes,
changelogs, leases, records); a wrong or missing key refused (exit 3) before anything is written, counted at the
server; key rotation rewrites nothing but the marker; no key material in output, logs or journals."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import time
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from counting_proxy import CountingProxy
from counting_proxy import emulator_endpoint as _endpoint
from counting_proxy import options_through as _options_through
from fixtures_core import read_all, write_keys

import blobstate
from blobstate.cli import main
from blobstate.codec.frame import ZSTD_MAGIC
from blobstate.codec.keys import KeyConfig
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.model import changelog
from blobstate.model.layout import new_blob_id
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.backends import open_blob_store
from blobstate.repository.repo import Repository

ROCKS_VALUE = b"rocks-value-0d9e2b7c-kept-secret"
DIR_VALUE = b"dir-store-line-5a1f33e8-kept-secret"
FILE_NAME = "payroll-6c41b2.csv"
QUERY_ID = "query-3f9a0c1d-kept-secret"
CHANGELOG_VALUE = "changelog-value-b83e11c9-kept-secret"
ROCKS, NOTES = StoreKey("default", "0", "rocks"), StoreKey("default", "0", "notes")


@pytest.fixture
def key_files(tmp_path) -> tuple[str, str]:
    """Two key files, K (text: hex) and K' (raw bytes), readable by their owner only."""
    k, k2 = tmp_path / "k.key", tmp_path / "k2.key"
    k.write_text(os.urandom(32).hex() + "\n")
    k2.write_bytes(os.urandom(32))
    for path in (k, k2):
        path.chmod(0o600)
    return str(k), str(k2)


def _stores(tmp_path: Path) -> tuple[Path, Path, dict[bytes, bytes]]:
    rocks, notes = tmp_path / "src" / "rocks", tmp_path / "src" / "notes"
    data = write_keys(rocks, {f"route-{i:04d}".encode(): ROCKS_VALUE + b"-%d" % i for i in range(300)})
    notes.mkdir(parents=True)
    (notes / FILE_NAME).write_bytes(b"".join(DIR_VALUE + b" %d\n" % i for i in range(2000)))
    (notes / "noise.bin").write_bytes(random.Random(5).randbytes(100_000))
    return rocks, notes, data


def _commit_all(target, tmp_path: Path, rocks: Path, notes: Path) -> None:
    """A snapshot of each store, two deltas of the RocksDB store (query ``QUERY_ID``; the first carried in its
    record, the second in a blob of its own), and a blob left under its TTL."""
    opts, work = target.storage_options, str(tmp_path / "work")
    blobstate.backup(str(notes), repo=target.url, storage_options=opts, store="notes", store_type="dir", work_base=work)
    with StoreCommitter(ROCKS, Repository.open(target.url, storage_options=opts),
                        work_dir=str(tmp_path / "work-rocks")) as committer:
        committer.backup(str(rocks), batch_id=0)
        ops = [(changelog.PUT, b"route-0001", CHANGELOG_VALUE.encode()), (changelog.DELETE, b"route-0002", None)]
        DeltaCommitter(committer).commit_changelog(changelog.encode(ops), batch_id=1, query_id=QUERY_ID)
        DeltaCommitter(committer, inline_max_bytes=0).commit_changelog(
            changelog.encode([(changelog.PUT, b"route-0003", CHANGELOG_VALUE.encode())]), batch_id=2,
            query_id=QUERY_ID)
        committer.repo.store.put(PutRequest(new_blob_id(ROCKS), b"staged, never committed", ttl_ms=60_000))
        committer.repo.close()


def _objects(target) -> dict[str, bytes]:
    """Every object of the repository as it is stored (leases included), read past blobstate's codec."""
    store = open_blob_store(target.url, storage_options=target.storage_options)
    try:
        return {rel: store.get_bytes(rel) for rel in store.inner._find("")}
    finally:
        store.close()


def _readable(data: bytes) -> bytes:
    """``data`` and, for a zstd frame, what it holds: plaintext is plaintext even compressed; for a JSON document
    (a record), every string value that is base64 decoded too (an inline changelog is plaintext in base64)."""
    if data[:4] == ZSTD_MAGIC:
        return data + zstandard.ZstdDecompressor().decompress(data, max_output_size=64 << 20)
    try:
        values = [v for v in json.loads(data).values() if isinstance(v, str)]
    except (ValueError, AttributeError):
        return data
    return data + b"".join(base64.b64decode(v, validate=True) for v in values if _is_base64(v))


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def _leaks(objects: dict[str, bytes]) -> dict[str, list[str]]:
    """Which known plaintexts each object kind shows."""
    secrets = {"rocks value": ROCKS_VALUE, "dir value": DIR_VALUE, "file name": FILE_NAME.encode(),
               "query id": QUERY_ID.encode(), "changelog value": CHANGELOG_VALUE.encode(),
               "lease body": b"expiresAtMs", "index id in a record": b"indexBlobId"}
    found: dict[str, list[str]] = {}
    for rel, data in objects.items():
        kind = "records" if rel.startswith("checkpoints/") else rel.split("/")[3] if rel.count("/") == 4 else rel
        text = _readable(data)
        found.setdefault(kind, [])
        found[kind] += [name for name, secret in secrets.items() if secret in text]
    return found


def test_an_encrypted_repository_backs_up_restores_verifies_and_collects_and_shows_no_plaintext(
        store_target, tmp_path, key_files, monkeypatch):
    target = store_target
    rocks, notes, data = _stores(tmp_path)
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", key_files[0])
    info = blobstate.init(repo=target.url, storage_options=target.storage_options, encrypt=True)
    assert info.encryption["algorithm"] == "AES-256-GCM" and "wrappedKey" in info.encryption
    _commit_all(target, tmp_path, rocks, notes)
    objects = _objects(target)
    kinds = {rel.split("/")[3] for rel in objects if rel.count("/") == 4 and not rel.startswith("checkpoints/")}
    assert kinds == {"blobs", "indexes", "ttl"} and any(r.startswith("checkpoints/") for r in objects)
    assert {kind: names for kind, names in _leaks(objects).items() if names} == {}
    # every verb works on it
    opts = target.storage_options
    assert [c.kind for c in blobstate.list_checkpoints(repo=target.url, storage_options=opts, store="rocks")] == \
        ["snapshot", "delta", "delta"]
    assert all(r.ok for r in blobstate.verify(repo=target.url, storage_options=opts, all_checkpoints=True))
    out = tmp_path / "restored"
    blobstate.restore(str(out / "notes"), repo=target.url, storage_options=opts, store="notes",
                      work_base=str(tmp_path / "host2"))
    assert {p.name: p.read_bytes() for p in (out / "notes").iterdir()} == \
        {p.name: p.read_bytes() for p in notes.iterdir()}
    result = blobstate.restore(str(out / "rocks"), repo=target.url, storage_options=opts, store="rocks",
                               work_base=str(tmp_path / "host2"))
    data[b"route-0001"] = CHANGELOG_VALUE.encode()
    del data[b"route-0002"]
    data[b"route-0003"] = CHANGELOG_VALUE.encode()
    assert result.deltas_applied == 2 and read_all(out / "rocks") == data
    # gc reads the sealed lease of the blob left under its TTL, and deletes it once expired
    later = int(time.time() * 1000) + 3_600_000
    reports = blobstate.gc(repo=target.url, storage_options=opts, now_ms=later)
    assert sum(len(r.expired_deleted) for r in reports) == 1
    assert not any("/ttl/" in rel for rel in _objects(target))


def test_the_plaintext_check_finds_every_kind_in_an_unencrypted_repository(tmp_path):
    """The control of the test above: the same commits without a key show each plaintext where it lives."""
    from cloud_servers import CloudTarget

    rocks, notes, _ = _stores(tmp_path)
    target = CloudTarget("file", f"file://{tmp_path}/plain", {})
    _commit_all(target, tmp_path, rocks, notes)
    found = _leaks(_objects(target))
    assert {"rocks value", "dir value", "changelog value"} <= set(found["blobs"])
    assert "file name" in found["indexes"] and "lease body" in found["ttl"]
    assert {"query id", "index id in a record", "changelog value"} <= set(found["records"])  # an inline delta


def _state(target, proxy: CountingProxy | None, tmp_path: Path) -> object:
    """What a refused command must leave as it was: the writes counted at the server (cloud), or every object's
    bytes and mtime (file://)."""
    if proxy is not None:
        return sum(proxy.count(m) for m in ("PUT", "POST", "DELETE", "PATCH"))
    root = Path(target.url[len("file://"):])
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_wrong_or_missing_key_is_refused_before_anything_is_written(store_target, tmp_path, key_files,
                                                                      monkeypatch):
    target = store_target
    k, k2 = key_files
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("state")
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", k)
    blobstate.backup(str(notes), repo=target.url, storage_options=target.storage_options, store="notes",
                     work_base=str(tmp_path / "work"))
    monkeypatch.delenv("BLOBSTATE_KEY_FILE")
    (notes / "a.txt").write_text("changed: a backup would upload it")
    proxy = CountingProxy(_endpoint(target)) if target.name != "file" else None
    env = {"BLOBSTATE_WORK_DIR": str(tmp_path / "work"),
           **(_options_through(target, proxy) if proxy else {"BLOBSTATE_STORAGE_OPTIONS": "{}"})}
    dest = tmp_path / "dest"
    commands = [["backup", str(notes)], ["restore", str(dest), "--store", "notes"], ["verify"], ["gc"], ["list"],
                ["init", "--encrypt"], ["recover", "--store", "notes"], ["stats"]]
    try:
        before = _state(target, proxy, tmp_path)
        for key in (["--key-file", k2], []):
            for command in commands:
                result = CliRunner().invoke(main, [*command, "--repo", target.url, *key], env=env)
                assert result.exit_code == 3, (command, key, result.output)
                assert "EncryptionKeyError" in result.output, result.output
                assert ("wrong key file" in result.output if key else
                        "no key file was given" in result.output or "--encrypt needs a key" in result.output)
        rotate = CliRunner().invoke(main, ["key", "rotate", "--repo", target.url, "--key-file", k2,
                                           "--new-key-file", k2], env=env)
        assert rotate.exit_code == 3 and "wrong key file" in rotate.output
        assert _state(target, proxy, tmp_path) == before  # not one write reached the store
        if proxy is not None:
            assert proxy.count("GET") > 0  # the marker was read through the proxy
        assert not dest.exists()
    finally:
        if proxy is not None:
            proxy.close()
    # and the right key still opens it
    ok = CliRunner().invoke(main, ["verify", "--repo", target.url, "--key-file", k],
                            env={"BLOBSTATE_STORAGE_OPTIONS": json.dumps(target.storage_options)})
    assert ok.exit_code == 0, ok.output


def _cli(*args: object, work: Path, **env: str):  # noqa: ANN202 - click's Result
    """The CLI in this process (exit code, stdout, stderr): a subprocess per call would cost a second each."""
    return CliRunner().invoke(main, [str(a) for a in args], env={"BLOBSTATE_WORK_DIR": str(work), **env})


def test_key_rotation_rewraps_the_data_key_and_rewrites_nothing_else(tmp_path, key_files):
    k, k2 = key_files
    repo, notes, work = tmp_path / "repo", tmp_path / "notes", tmp_path / "work"
    notes.mkdir()
    (notes / "a.txt").write_text("state before the rotation")
    assert _cli("init", "--repo", repo, "--encrypt", "--key-file", k, work=work).exit_code == 0
    assert _cli("backup", notes, "--repo", repo, "--key-file", k, work=work).exit_code == 0
    marker = json.loads((repo / "blobstate-repository.json").read_text())

    def objects() -> dict[str, tuple[int, bytes]]:
        return {str(p.relative_to(repo)): (p.stat().st_mtime_ns, p.read_bytes()) for p in repo.rglob("*")
                if p.is_file() and p.name != "blobstate-repository.json"}

    data = objects()
    rotated = _cli("key", "rotate", "--repo", repo, "--key-file", k, "--new-key-file", k2, "--json", work=work)
    assert rotated.exit_code == 0, rotated.output
    after = json.loads((repo / "blobstate-repository.json").read_text())
    assert after["repositoryId"] == marker["repositoryId"] and objects() == data  # no object rewritten
    assert after["encryption"]["keyId"] == json.loads(rotated.stdout)["encryption"]["keyId"] != \
        marker["encryption"]["keyId"]
    assert after["encryption"]["wrappedKey"] != marker["encryption"]["wrappedKey"]
    old = _cli("restore", tmp_path / "old", "--repo", repo, "--store", "notes", "--key-file", k, work=work)
    assert old.exit_code == 3 and "wrong key file" in old.stderr
    new = _cli("restore", tmp_path / "new", "--repo", repo, "--store", "notes", "--key-file", k2,
               work=tmp_path / "host2")
    assert new.exit_code == 0, new.output
    assert (tmp_path / "new" / "a.txt").read_text() == "state before the rotation"
    again = _cli("key", "rotate", "--repo", repo, "--key-file", k, "--new-key-file", k, work=work)  # the old key
    assert again.exit_code == 3 and json.loads((repo / "blobstate-repository.json").read_text()) == after


def test_no_key_material_in_output_logs_or_journals(tmp_path, key_files):
    import base64

    from blobstate.codec.keys import EncryptionInfo

    k, k2 = key_files
    repo, notes, work = tmp_path / "repo", tmp_path / "notes", tmp_path / "work"
    notes.mkdir()
    (notes / "a.txt").write_text("x" * 5000)
    outputs = [_cli("-vvv", "init", "--repo", repo, "--encrypt", "--key-file", k, "--json", work=work),
               _cli("-vvv", "backup", notes, "--repo", repo, "--key-file", k, "--json", work=work),
               _cli("-vvv", "restore", tmp_path / "out", "--repo", repo, "--store", "notes", "--key-file", k,
                    work=tmp_path / "host2"),
               _cli("-vvv", "verify", "--repo", repo, "--key-file", k2, work=work),
               _cli("-vvv", "key", "rotate", "--repo", repo, "--key-file", k, "--new-key-file", k2, work=work)]
    assert [o.exit_code for o in outputs] == [0, 0, 0, 3, 0], [o.output for o in outputs]
    marker = json.loads((repo / "blobstate-repository.json").read_text())
    block = marker["encryption"]
    provider = KeyConfig(key_file=k2).provider_for(block["keyProvider"], block["keyId"])
    data_key = provider.unwrap(EncryptionInfo.from_json(block).wrapped_key, block["keyId"],
                               marker["repositoryId"].encode())
    secrets = [Path(k).read_text().strip(), Path(k2).read_bytes().hex(), data_key.hex(),
               base64.b64encode(data_key).decode().rstrip("=")]
    text = "".join(o.output for o in outputs)
    assert "INFO blobstate" in text  # -vvv did log
    journals = b"".join(p.read_bytes() for root in (work, tmp_path / "host2") for p in root.rglob("*")
                        if p.is_file() and p.name != "a.txt")
    for secret in secrets:
        assert secret not in text and secret.encode() not in journals


def test_swapped_encrypted_objects_are_refused_before_they_are_parsed(tmp_path, key_files):
    k, _ = key_files
    repo, notes, work = tmp_path / "repo", tmp_path / "notes", tmp_path / "work"
    notes.mkdir()
    (notes / "a.txt").write_text("first file " * 100)
    (notes / "b.txt").write_text("second file " * 100)
    assert _cli("backup", notes, "--repo", repo, "--key-file", k, work=work).exit_code == 0
    (notes / "c.txt").write_text("third")
    assert _cli("backup", notes, "--repo", repo, "--key-file", k, work=work).exit_code == 0
    blobs = sorted((repo / "default" / "0" / "notes" / "blobs").iterdir())
    saved = {p: p.read_bytes() for p in blobs}
    blobs[0].write_bytes(saved[blobs[1]])  # one blob's bytes under another's name
    host = tmp_path / "host2"  # a host without local checkpoints: everything is downloaded
    r = _cli("restore", tmp_path / "swapped", "--repo", repo, "--store", "notes", "--key-file", k, work=host)
    # refused at its tag, or sooner, when its plain bytes overrun the size its index entry declares
    assert r.exit_code == 3 and ("does not authenticate" in r.stderr or "the index declares" in r.stderr)
    assert not (tmp_path / "swapped").exists()
    verified = _cli("verify", "--repo", repo, "--key-file", k, work=host)
    assert verified.exit_code == 3 and blobs[0].name in verified.output
    blobs[0].write_bytes(saved[blobs[0]])
    with Repository.open(f"file://{repo}", create=False, key_config=KeyConfig(key_file=k)) as opened:
        first, second = (repo / cp.index_blob_id for cp in opened.log.history(NOTES))
    first.write_bytes(second.read_bytes())  # the older checkpoint's index swapped for the newer one's
    old = _cli("restore", tmp_path / "d1", "--repo", repo, "--store", "notes", "--key-file", k, "--checkpoint", "1",
               work=host)
    assert old.exit_code == 3 and "does not authenticate" in old.stderr and first.name in old.stderr
    new = _cli("restore", tmp_path / "d2", "--repo", repo, "--store", "notes", "--key-file", k, work=host)
    assert new.exit_code == 0, new.output


def test_record_bodies_are_sealed_in_a_sql_log_too(tmp_path, key_files):
    import sqlite3

    k, _ = key_files
    repo, notes, db = tmp_path / "repo", tmp_path / "notes", tmp_path / "log.db"
    notes.mkdir()
    (notes / FILE_NAME).write_bytes(DIR_VALUE)
    log = f"sqlite:///{db}"
    backup = _cli("backup", notes, "--repo", repo, "--log", log, "--key-file", k, work=tmp_path / "work")
    assert backup.exit_code == 0, backup.output
    rows = sqlite3.connect(db).execute("SELECT job, generation, checkpoint_id, record FROM blobstate_checkpoints")
    (job, generation, checkpoint_id, record), = rows.fetchall()
    doc = json.loads(record)
    assert (job, generation, doc["kind"]) == ("default", 1, "sealed") and checkpoint_id == backup.stdout.strip()
    assert "indexBlobId" not in record and "notes/indexes" not in record
    restored = _cli("restore", tmp_path / "out", "--repo", repo, "--log", log, "--store", "notes", "--key-file", k,
                    work=tmp_path / "host2")
    assert restored.exit_code == 0, restored.output
    assert (tmp_path / "out" / FILE_NAME).read_bytes() == DIR_VALUE
