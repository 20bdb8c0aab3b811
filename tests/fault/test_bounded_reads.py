"""Issue 27, case 7: every metadata read is bounded before it is parsed. A checkpoint record is a few hundred
bytes and a lease about 150: an oversized object under ``checkpoints/`` or ``ttl/`` is refused with a typed error
(exit 3) after reading at most its cap, never held whole (a 300 MiB record cost a restore 335 MiB RSS)."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import pytest

from blobstate.errors import CorruptIndexError
from blobstate.model.records import MAX_RECORD_BYTES, StoreKey
from blobstate.repository.repo import Repository

MiB = 1 << 20
KEY = StoreKey("default", "0", "s")
# A parent that runs its arguments as its only child and prints the child's peak RSS (KiB) on stderr.
MEASURE = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)")


def measured_cli(args: list, *, work_base, env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """``blobstate ARGS`` in a subprocess: (exit code, stderr, peak RSS in KiB)."""
    from fixtures_core import cli_env

    proc = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "blobstate.cli", *map(str, args)],
                          capture_output=True, text=True, env={**cli_env(work_base), **(env or {})}, timeout=300)
    *lines, peak = proc.stderr.strip().splitlines()
    return proc.returncode, "\n".join(lines), int(peak)


def peak_python_bytes(fn) -> int:
    """The peak of Python allocations while ``fn`` runs (``fn`` is expected to raise ``CorruptIndexError``)."""
    tracemalloc.start()
    try:
        with pytest.raises(CorruptIndexError, match="larger than"):
            fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def small_store(tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    (store / "f").write_bytes(b"six b!")
    return store


def test_a_300_mib_checkpoint_record_on_file_is_refused_unread(tmp_path, repo, cli, work_base):
    assert cli("backup", small_store(tmp_path), "--repo", repo, "-q").returncode == 0
    [record] = (repo / "checkpoints").rglob("*.json")
    with open(record, "r+b") as fh:
        fh.truncate(300 * MiB)  # sparse: the real record, then 300 MiB of zeros
    code, stderr, peak_kib = measured_cli(["restore", tmp_path / "out" / "s", "--repo", repo],
                                          work_base=tmp_path / "h")
    assert code == 3, stderr
    assert "checkpoint record" in stderr and "larger than 65536 bytes" in stderr, stderr
    assert peak_kib < 100 * 1024, peak_kib  # 36 MiB measured; 336 MiB when the record was read whole
    assert not (tmp_path / "out" / "s").exists()
    with Repository.open(f"file://{repo}") as repository:
        assert peak_python_bytes(lambda: repository.log.history(KEY)) < 2 * MAX_RECORD_BYTES + MiB


def test_an_oversized_checkpoint_record_on_s3_is_refused_unread(tmp_path, s3_target, work_base):
    import boto3

    from blobstate import api

    api.backup(str(small_store(tmp_path)), repo=s3_target.url, storage_options=s3_target.storage_options)
    client = boto3.client("s3", endpoint_url=s3_target.storage_options["endpoint_url"],
                          aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
    [record] = [o["Key"] for o in client.list_objects_v2(Bucket=s3_target.bucket, Prefix="repo/checkpoints/")
                ["Contents"]]
    real = client.get_object(Bucket=s3_target.bucket, Key=record)["Body"].read()
    client.put_object(Bucket=s3_target.bucket, Key=record, Body=real + b" " * (24 * MiB))
    with Repository.open(s3_target.url, storage_options={**s3_target.storage_options,
                                                         "skip_instance_cache": True}) as repository:
        with pytest.raises(CorruptIndexError):  # once, so that the S3 client's own first-use loading is done
            repository.log.history(KEY)
        assert peak_python_bytes(lambda: repository.log.history(KEY)) < 2 * MAX_RECORD_BYTES + MiB
    code, stderr, _ = measured_cli(["restore", tmp_path / "out" / "s", "--repo", s3_target.url],
                                   work_base=tmp_path / "h", env=s3_target.env)
    assert code == 3 and "checkpoint record" in stderr and "larger than" in stderr, stderr


def test_an_oversized_lease_is_never_read_whole(tmp_path, repo):
    from blobstate.plugins.fsspec_store import MAX_LEASE_BYTES, FsspecBlobStore

    store = FsspecBlobStore(f"file://{repo}")
    lease = repo / "default" / "0" / "s" / "ttl" / "x"
    lease.parent.mkdir(parents=True)
    with open(lease, "wb") as fh:
        fh.write(b'{"blobId": "default/0/s/blobs/x", "expiresAtMs": 1}')
        fh.truncate(64 * MiB)
    tracemalloc.start()
    try:
        expired = store.expired("default/0/s", now_ms=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert expired == []  # unreadable (too large): a torn lease, kept until it is old
    assert peak < 16 * MAX_LEASE_BYTES + MiB, peak


def test_an_oversized_row_of_the_sql_log_is_cut_by_the_database(tmp_path):
    from sqlalchemy import insert

    from blobstate.plugins.sql_log import open_sql_log
    from blobstate.testing.checkpoint_logs import make_checkpoint

    log = open_sql_log(f"sqlite:///{tmp_path}/log.db")
    try:
        first = log.append(make_checkpoint(KEY), 0)
        padded = first.with_generation(2).to_bytes().decode() + " " * (48 * MiB)
        with log.engine.begin() as conn:
            conn.execute(insert(log.table).values(job=KEY.job, task=KEY.task, store=KEY.store, generation=2,
                                                  checkpoint_id="x", created_time_ms=0, record=padded))
        del padded
        assert peak_python_bytes(lambda: log.history(KEY)) < 2 * MAX_RECORD_BYTES + MiB
        assert peak_python_bytes(lambda: log.latest(KEY)) < 2 * MAX_RECORD_BYTES + MiB
    finally:
        log.close()


def test_an_oversized_kafka_record_is_refused_without_being_fetched_whole(kafka_broker):
    """A record of the Kafka log is a few hundred bytes; a 900 KB one (under the brokers' default message limit)
    is refused (``CorruptIndexError``, exit 3). The 0.9 broker's fetch protocol lets the consumer cap a fetch
    (``FETCH_MAX_BYTES``): the record is never held (before: a 1 MiB fetch held it whole). A modern broker (tansu)
    returns one whole record past the cap (so that consumers make progress): there the topic's message limit bounds
    it, and its size is refused before it is parsed."""
    import uuid

    from kafka import KafkaProducer
    from kafka_brokers import fresh_topic

    from blobstate.plugins.kafka import open_kafka_log
    from blobstate.plugins.kafka.acceptance import record_key

    topic = fresh_topic(kafka_broker, "big")
    size = 900_000
    producer = KafkaProducer(acks="all", enable_idempotence=False, max_request_size=2 * MiB,
                             **kafka_broker.client_kwargs())
    try:
        producer.send(topic, key=record_key(KEY, 1, uuid.uuid4().hex), value=b"{" + b" " * size,
                      partition=0).get(timeout=30)
    finally:
        producer.close()

    def peak_of_history(url: str, error: bool) -> int:
        log = open_kafka_log(url)  # a fresh client: its connection and fetches counted
        try:
            tracemalloc.start()
            try:
                if error:
                    with pytest.raises(CorruptIndexError, match="larger than"):
                        log.history(KEY)
                else:
                    log.history(KEY)
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        finally:
            log.close()

    warm = kafka_broker.url(fresh_topic(kafka_broker, "warm"))
    peak_of_history(warm, False)  # the client's first-use loading done
    base = peak_of_history(warm, False)
    peak = peak_of_history(kafka_broker.url(topic), True) - base
    if kafka_broker.name.startswith("kafka"):  # Apache Kafka 0.9: the fetch is capped, the record never held
        assert peak < size * 3 // 4, peak
    assert peak < 4 * size + MiB, peak  # a modern broker: one record, as large as the topic allows


def test_a_300_mib_object_at_the_markers_name_is_refused_unread(tmp_path, repo, cli, work_base):
    """Issue 27 case 7, the marker: every command reads it first; an object of 300 MiB at its name is refused after
    ``MAX_MARKER_BYTES``, never read whole."""
    from blobstate.plugins.fsspec_store import FsspecBlobStore
    from blobstate.repository.marker import MARKER_ID, MAX_MARKER_BYTES, read_marker

    assert cli("backup", small_store(tmp_path), "--repo", repo, "-q").returncode == 0
    with open(repo / MARKER_ID, "r+b") as fh:
        fh.truncate(300 * MiB)  # sparse: the real marker, then 300 MiB of zeros
    code, stderr, peak_kib = measured_cli(["restore", tmp_path / "out" / "s", "--repo", repo],
                                          work_base=tmp_path / "h")
    assert code == 3, stderr
    assert "repository marker" in stderr and f"larger than {MAX_MARKER_BYTES} bytes" in stderr, stderr
    assert peak_kib < 100 * 1024, peak_kib
    assert not (tmp_path / "out" / "s").exists()
    assert peak_python_bytes(lambda: read_marker(FsspecBlobStore(f"file://{repo}"))) < 2 * MAX_MARKER_BYTES + MiB
