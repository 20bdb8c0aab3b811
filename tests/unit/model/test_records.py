"""``blobstate.model.records``: store keys, and snapshot, delta and group checkpoint records: their JSON versions,
round trips (Hypothesis), group expansion, and every validation rule (a record names only its own store's
objects, one entry per partition and kind, bounded sizes)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobstate.errors import ConfigurationError, CorruptIndexError, InvalidRecordError
from blobstate.model.keygroups import MAX_KEY_GROUPS
from blobstate.model.records import (
    DELTA,
    GROUP,
    MAX_CHANGELOG_BYTES,
    MAX_INDEX_BYTES,
    MAX_INLINE_CHANGELOG_BYTES,
    MAX_PARTITIONS,
    MAX_RECORD_BYTES,
    MAX_VOIDS,
    SNAPSHOT,
    Checkpoint,
    PartitionEntry,
    PartitionRecord,
    Replica,
    StoreKey,
)

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEY = StoreKey("job", "0", "store")


def index_id(i: int, key: StoreKey = KEY) -> str:
    return f"{key.prefix}/indexes/{i:032x}.json"


def blob_id(i: int, key: StoreKey = KEY) -> str:
    return f"{key.prefix}/blobs/{i:032x}"


def snapshot(**kw) -> Checkpoint:
    return Checkpoint(**{"store_key": KEY, "checkpoint_id": "1700000000000-abcd0001", "generation": 3,
                         "index_blob_id": index_id(1), "index_crc32c": 9, "index_size": 100, "created_time_ms": 5,
                         "batch_id": 2, "writer_id": "host:1", **kw})


def delta(**kw) -> Checkpoint:
    return snapshot(**{"index_blob_id": "", "index_crc32c": 0, "index_size": 0, "kind": DELTA,
                       "changelog_blob_id": blob_id(2), "changelog_crc32c": 4, "changelog_size": 50, **kw})


def inline(payload: bytes = b"changes", **kw) -> Checkpoint:
    return delta(**{"changelog_blob_id": "", "changelog_size": len(payload), "changelog_inline": payload, **kw})


def entry(p: int, kind: str = DELTA, batch: int = 2, **kw) -> PartitionEntry:
    target = blob_id(100 + p) if kind == DELTA else index_id(100 + p)
    return PartitionEntry(**{"partition": p, "kind": kind, "checkpoint_id": f"part-{p}-{kind}", "batch_id": batch,
                             "blob_id": target, "crc32c": 1, "size": 10, **kw})


def group(*entries: PartitionEntry, n: int = 2, **kw) -> Checkpoint:
    return snapshot(**{"index_blob_id": "", "index_crc32c": 0, "index_size": 0, "kind": GROUP, "num_partitions": n,
                       "partitions": entries or (entry(0), entry(1)), **kw})


def parse(record: Checkpoint | dict) -> Checkpoint:
    data = json.dumps(record).encode() if isinstance(record, dict) else record.to_bytes()
    return Checkpoint.from_bytes(data, source="the-record")


def test_each_kind_writes_the_oldest_version_that_holds_it():
    assert snapshot().to_json()["schemaVersion"] == 1 and "kind" not in snapshot().to_json()
    assert snapshot(query_id="q").to_json()["schemaVersion"] == 2
    assert delta().to_json()["schemaVersion"] == 2 and delta().to_json()["changelogSizeInBytes"] == 50
    assert group().to_json()["schemaVersion"] == 3 and len(group().to_json()["partitions"]) == 2
    assert inline().to_json()["schemaVersion"] == 4 and "changelogBlobId" not in inline().to_json()
    assert "changelogInline" not in delta().to_json()
    for record in (snapshot(), snapshot(query_id="q"), delta(), group(), inline()):
        again = parse(record)
        assert again.to_json() == record.to_json()


keys = st.builds(StoreKey, *[st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._=-]{0,20}", fullmatch=True)] * 3).filter(
    lambda k: ".." not in (k.job, k.task, k.store))


@FAST
@given(keys, st.integers(1, 1 << 40), st.none() | st.integers(0, 1 << 40), st.sampled_from([SNAPSHOT, DELTA]),
       st.text(st.characters(codec="ascii", categories=["L", "N"]), max_size=30))
def test_snapshot_and_delta_records_round_trip(key, generation, batch, kind, query):
    if kind == DELTA:
        record = delta(store_key=key, generation=generation, batch_id=batch if batch is not None else 0,
                       changelog_blob_id=blob_id(generation, key), query_id=query)
    else:
        record = snapshot(store_key=key, generation=generation, batch_id=batch, index_blob_id=index_id(generation, key),
                          query_id=query)
    again = parse(record)
    assert again.to_json() == record.to_json()
    assert (again.store_key, again.generation, again.kind, again.batch_id) == (key, generation, kind, record.batch_id)


def test_a_group_expands_into_one_record_per_partition_entry():
    g = group(entry(0), entry(1), entry(1, SNAPSHOT, batch=1), n=3, generation=8, query_id="q")
    parts = g.expand()
    assert all(isinstance(p, PartitionRecord) and p.generation == 8 and p.query_id == "q" for p in parts)
    assert [(p.partition, p.kind, p.batch_id) for p in parts] == [(0, DELTA, 2), (1, DELTA, 2), (1, SNAPSHOT, 1)]
    assert parts[0].changelog_blob_id == blob_id(100) and parts[0].index_blob_id == ""
    assert parts[2].index_blob_id == index_id(101) and parts[2].changelog_blob_id == ""
    assert g.entry(1, SNAPSHOT).batch_id == 1 and g.entry(2) is None
    assert snapshot().expand() == [snapshot()]
    def shape(records):
        return [(p.partition, p.kind, p.checkpoint_id, p.changelog_blob_id, p.index_blob_id) for p in records]

    assert shape(parse(g).expand()) == shape(parts)


def test_an_inline_changelog_round_trips_as_base64_and_the_largest_fits_a_record():
    """The payload (any bytes, base64 in the JSON) comes back byte for byte; one of ``MAX_INLINE_CHANGELOG_BYTES``
    of random bytes (base64 gains nothing from them) still makes a record under ``MAX_RECORD_BYTES``."""
    import os

    payload = os.urandom(MAX_INLINE_CHANGELOG_BYTES)
    record = inline(payload, writer_id="w" * 200, query_id="q" * 200, lineage_id="l" * 200)
    assert record.is_inline and not delta().is_inline
    assert len(record.to_bytes()) < MAX_RECORD_BYTES
    again = parse(record)
    assert again.changelog_inline == payload and again.changelog_blob_id == "" and again.is_inline
    assert again.with_generation(9).changelog_inline == payload


def test_summaries_name_the_checkpoint_and_a_delta_says_so():
    assert snapshot().summary_json() == {"checkpointId": "1700000000000-abcd0001", "generation": 3, "batchId": 2}
    assert delta().summary_json()["kind"] == DELTA
    assert snapshot().with_generation(9).generation == 9


OTHER = StoreKey("job", "0", "other")
BAD = {
    "an index of another store": lambda: snapshot(index_blob_id=index_id(1, OTHER)),
    "an index that is a blob": lambda: snapshot(index_blob_id=blob_id(1)),
    "an index larger than any": lambda: snapshot(index_size=MAX_INDEX_BYTES + 1),
    "a changelog of another store": lambda: delta(changelog_blob_id=blob_id(2, OTHER)),
    "a changelog larger than any": lambda: delta(changelog_size=MAX_CHANGELOG_BYTES + 1),
    "a delta naming an index": lambda: delta(index_blob_id=index_id(1)),
    "a delta without a batch": lambda: delta(batch_id=None),
    "an inline changelog of another size": lambda: inline(b"abc", changelog_size=4),
    "an inline changelog above the bound": lambda: inline(b"x" * (MAX_INLINE_CHANGELOG_BYTES + 1)),
    "a snapshot carrying a changelog": lambda: snapshot(changelog_inline=b"x"),
    "an unknown kind": lambda: snapshot(kind="merge"),
    "a checkpoint id with a slash": lambda: snapshot(checkpoint_id="../x"),
    "a writer id with a newline": lambda: snapshot(writer_id="a\nb"),
    "a query id of 201 characters": lambda: snapshot(query_id="q" * 201),
    "generation 0": lambda: snapshot(generation=0),
    "a group with an index of its own": lambda: group(index_blob_id=index_id(1)),
    "a group of no partitions": lambda: group(n=0),
    "a group of too many partitions": lambda: group(n=MAX_PARTITIONS + 1),
    "a group committing nothing": lambda: snapshot(kind=GROUP, index_blob_id="", index_crc32c=0, index_size=0,
                                                   num_partitions=2),
    "a partition out of range": lambda: group(entry(0), entry(2)),
    "two deltas of one partition": lambda: group(entry(0), entry(0)),
    "an entry of an unknown kind": lambda: group(entry(0, kind="merge")),
    "an entry with a bad checkpoint id": lambda: group(entry(0, checkpoint_id="a b")),
    "an entry naming another store's blob": lambda: group(entry(0, blob_id=blob_id(5, OTHER))),
    "a snapshot entry naming a blob": lambda: group(entry(0, SNAPSHOT, blob_id=blob_id(5))),
    "a group voiding itself": lambda: group(voids=("1700000000000-abcd0001",)),
    "a void naming a bad id": lambda: void(voids=("a b",)),
    "a void naming too many": lambda: void(voids=tuple(f"g-{i}" for i in range(MAX_VOIDS + 1))),
    "a group of fewer key groups than partitions": lambda: group(n=2, key_groups=1),
    "a group of too many key groups": lambda: group(key_groups=MAX_KEY_GROUPS + 1),
    "a replica of a partition out of range": lambda: group(replicas=(Replica(2, "executor_h_0"),)),
    "a partition's replicas named twice": lambda: group(replicas=(Replica(0), Replica(0))),
    "a replica's executor with a newline": lambda: group(replicas=(Replica(0, "a\nb"),)),
}


def void(**kw) -> Checkpoint:
    """A void record (issue 39 case 7): a group record of no partition naming the groups that count for nothing."""
    return snapshot(**{"index_blob_id": "", "index_crc32c": 0, "index_size": 0, "kind": GROUP, "num_partitions": 2,
                       "partitions": (), "voids": ("1700000000000-abcd0000",), **kw})


def test_a_void_record_is_version_5_and_round_trips_standing_for_no_partition_record():
    record = void()
    doc = record.to_json()
    assert doc["schemaVersion"] == 5 and list(doc["voids"]) == ["1700000000000-abcd0000"]
    assert not doc["partitions"]
    assert parse(record) == replace(record, schema_version=5) and record.expand() == []
    assert "voids" not in group().to_json() and group().to_json()["schemaVersion"] == 3


def test_a_key_grouped_group_is_version_6_and_round_trips_and_one_without_reads_as_before():
    record = group(key_groups=4096)
    doc = record.to_json()
    assert doc["schemaVersion"] == 6 and doc["keyGroups"] == 4096
    assert parse(record) == replace(record, schema_version=6) and parse(record).key_groups == 4096
    plain = group()
    assert "keyGroups" not in plain.to_json() and plain.to_json()["schemaVersion"] == 3
    assert parse(plain).key_groups == 0


def test_a_groups_replicas_are_metadata_that_takes_no_schema_version_and_older_records_read_as_before():
    where = (Replica(0, "executor_127.0.0.2_0", "executor_127.0.0.3_1", 6), Replica(1, "executor_127.0.0.3_1"))
    record = group(replicas=where)
    doc = record.to_json()
    assert doc["schemaVersion"] == 3 and list(doc["replicas"]) == [
        {"partition": 0, "primary": "executor_127.0.0.2_0", "standby": "executor_127.0.0.3_1", "standbyBatchId": 6},
        {"partition": 1, "primary": "executor_127.0.0.3_1", "standby": "", "standbyBatchId": None}]
    assert parse(record) == replace(record, schema_version=3) and parse(group()).replicas == ()
    record.validate()
    # a reader of schema 6 that knows no replicas: the same record without them (an unknown field is ignored)
    doc.pop("replicas")
    assert parse(doc) == replace(group(), schema_version=3)


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_record_breaking_a_rule_is_corrupt(case):
    with pytest.raises(CorruptIndexError, match="corrupt checkpoint record the-record"):
        parse(BAD[case]())


#: a record built wrong, and the field ``validate`` names (its JSON path)
WRONG_FIELD = {
    "a crc32c that is text": (lambda: group(entry(0), entry(1, crc32c="1")), "partitions[1].crc32c"),
    "a size that is a bool": (lambda: group(entry(0, size=True), entry(1)), "partitions[0].sizeInBytes"),
    "a partition that is negative": (lambda: group(entry(-1), entry(1)), "partitions[0].partition"),
    "a batch id that is a float": (lambda: delta(batch_id=2.5), "batchId"),
    "a writer id of 201 characters": (lambda: snapshot(writer_id="w" * 201), "writerId"),
    "a created time that is text": (lambda: snapshot(created_time_ms="5"), "createdTimeMs"),
    "a checkpoint id with a slash": (lambda: snapshot(checkpoint_id="../x"), "checkpointId"),
    "a partition out of range": (lambda: group(entry(0), entry(2)), "partitions[1].partition"),
    "an entry naming another store's blob": (lambda: group(entry(0, blob_id=blob_id(5, OTHER))),
                                             "partitions[0].blobId"),
    "a writer id with a newline": (lambda: snapshot(writer_id="a\nb"), "writerId"),
    "a group of no partitions": (lambda: group(n=0), "numPartitions"),
}


@pytest.mark.parametrize("case", sorted(WRONG_FIELD))
def test_a_record_built_wrong_is_refused_by_its_schema_naming_the_field(case):
    build, field = WRONG_FIELD[case]
    with pytest.raises(InvalidRecordError, match="malformed") as caught:
        build().validate()
    assert caught.value.field == field and field in str(caught.value)
    assert isinstance(caught.value, ConfigurationError) and caught.value.exit_code == 2


@pytest.mark.parametrize("case", sorted(set(BAD) - {"generation 0"}))
def test_every_record_the_log_would_refuse_is_refused_before_it_is_written(case):
    with pytest.raises(InvalidRecordError):
        BAD[case]().validate()


def test_a_well_formed_record_of_every_kind_validates_before_its_generation_is_known():
    for record in (snapshot(), delta(), inline(), group(), void(), group(key_columns=(("k", "string"),))):
        record.with_generation(0).validate()
        record.validate()


def test_a_record_too_large_to_write_is_refused_as_a_whole():
    long_id = "c" * 110  # every entry well formed; 400 of them with ids this long are more than a record holds
    record = group(*[entry(p, kind, checkpoint_id=f"{long_id}-{p}-{kind}") for p in range(MAX_PARTITIONS)
                     for kind in (DELTA, SNAPSHOT)], n=MAX_PARTITIONS)
    with pytest.raises(InvalidRecordError, match="larger than any checkpoint record") as caught:
        record.validate()
    assert caught.value.field == "" and len(record.to_bytes()) > MAX_RECORD_BYTES


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(schemaVersion=7), lambda d: d.update(schemaVersion="1"), lambda d: d.update(generation=True),
    lambda d: d.update(indexCrc32c=-1), lambda d: d.update(batchId=1.5), lambda d: d.pop("jobName"),
    lambda d: d.update(storeName="a/b"), lambda d: d.update(partitions={}), lambda d: d.update(writerId=7),
    lambda d: d.update(partitions=[1]), lambda d: d.update(filler="x" * (64 << 10)),
    lambda d: d.update(changelogBlobId=blob_id(3)),  # a snapshot naming a changelog
    lambda d: d.update(numPartitions=2),  # a snapshot naming partitions
    lambda d: d.update(changelogInline="eA=="),  # a snapshot carrying a changelog
    lambda d: d.update(voids=["g-1"]),  # a snapshot voiding a group
    lambda d: d.update(keyGroups=128),  # a snapshot naming key groups
    lambda d: d.update(replicas=[{"partition": 0}]),  # a snapshot naming replicas
    lambda d: d.update(kind=DELTA, indexBlobId="", indexCrc32c=0, indexSizeInBytes=0, changelogBlobId=blob_id(2),
                       changelogSizeInBytes=1, changelogInline="eA=="),  # an inline changelog naming a blob too
    lambda d: d.update(kind=GROUP, indexBlobId="", indexCrc32c=0, indexSizeInBytes=0, numPartitions=1,
                       partitions=[entry(0).to_json()], changelogInline=""),  # a group carrying a changelog
    lambda d: d.update(kind=GROUP, indexBlobId="", indexCrc32c=0, indexSizeInBytes=0, numPartitions=1,
                       partitions=[entry(0).to_json(), entry(0).to_json()]),  # one partition's delta twice
])
def test_a_document_of_the_wrong_shape_is_corrupt(mutate):
    doc = snapshot().to_json()
    mutate(doc)
    with pytest.raises(CorruptIndexError):
        parse(doc)


@pytest.mark.parametrize("data", [b"", b"[]", b"{", b"\xff", b"[" * 100_000, b'{"schemaVersion": 1}'])
def test_bytes_that_are_not_a_record_are_corrupt(data):
    with pytest.raises(CorruptIndexError):
        Checkpoint.from_bytes(data)


def test_store_keys():
    assert StoreKey.parse("a/b/c") == StoreKey("a", "b", "c") and str(StoreKey("a", "b", "c")) == "a/b/c"
    with pytest.raises(ConfigurationError, match="job/task/store"):
        StoreKey.parse("a/b")
    assert StoreKey.for_directory("/data/state/orders/") == StoreKey("default", "0", "orders")
    assert StoreKey.for_directory("/x/y", job="j", task="t", store="s") == StoreKey("j", "t", "s")
    assert KEY.owns_blob(blob_id(1)) and not KEY.owns_blob(blob_id(1, OTHER)) and not KEY.owns_blob(index_id(1))
    assert KEY.owns_index(index_id(1)) and not StoreKey("job", "0", "stor").owns_index(index_id(1))
    assert sorted([StoreKey("b", "0", "a"), StoreKey("a", "1", "z")])[0].job == "a"
