"""``SealedRecord``: the envelope of an encrypted repository's checkpoint record. It is written in the
documented shape (every field, in order, the body as base64), reads back as a ``SealedRecord`` through
``Checkpoint.from_bytes`` whatever the body, and any defect of the envelope is a ``CorruptIndexError`` there
(``SealedRecord.decode`` itself raises ``ValueError``). ``test_written_before.py`` pins the bytes an older
blobstate wrote."""

from __future__ import annotations

import base64
import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstate.errors import CorruptIndexError
from blobstate.model.records import MAX_RECORD_BYTES, SEALED, SEALED_SCHEMA_VERSION, Checkpoint, SealedRecord, StoreKey

KEY = StoreKey("job", "0", "store")


def test_the_envelope_is_written_in_the_documented_shape():
    record = SealedRecord.of(KEY, "cp-1", 7, 1_700_000_000_000, b"\x00nonce|ciphertext|tag\xff")
    doc = json.loads(record.to_bytes())
    assert list(doc) == ["schemaVersion", "kind", "checkpointId", "generation", "jobName", "taskName", "storeName",
                         "createdTimeMs", "sealed"]
    assert doc == {"schemaVersion": 3, "kind": "sealed", "checkpointId": "cp-1", "generation": 7, "jobName": "job",
                   "taskName": "0", "storeName": "store", "createdTimeMs": 1_700_000_000_000,
                   "sealed": base64.b64encode(b"\x00nonce|ciphertext|tag\xff").decode()}
    assert record.body == b"\x00nonce|ciphertext|tag\xff"
    assert (record.kind, record.schema_version, record.index_blob_id, record.index_size) == (SEALED, 3, "", 0)


@settings(max_examples=40, deadline=None)
@given(body=st.binary(max_size=2048), generation=st.integers(1, 2**63 - 1), created=st.integers(0, 2**63 - 1),
       checkpoint_id=st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,127}\Z"))
def test_any_envelope_reads_back_through_the_record_parser(body, generation, created, checkpoint_id):
    record = SealedRecord.of(KEY, checkpoint_id, generation, created, body)
    back = Checkpoint.from_bytes(record.to_bytes(), source="log")
    assert isinstance(back, SealedRecord) and back == record and back.body == body


def test_a_record_with_a_later_generation_is_a_new_envelope_of_the_same_body():
    record = SealedRecord.of(KEY, "cp", 1, 5, b"body")
    moved = Checkpoint.from_bytes(record.with_generation(2).to_bytes())
    assert isinstance(moved, SealedRecord) and moved.generation == 2 and moved.body == b"body"


def test_the_envelope_keeps_version_3_whatever_it_seals():
    assert SEALED_SCHEMA_VERSION == 3
    assert json.loads(SealedRecord.of(KEY, "c", 1, 0, b"").to_bytes())["schemaVersion"] == 3


def valid() -> dict:
    return json.loads(SealedRecord.of(KEY, "cp-1", 1, 5, b"body").to_bytes())


@pytest.mark.parametrize("change, why", [
    (lambda d: {**d, "sealed": "Zm9v!"}, "not base64"),
    (lambda d: {**d, "sealed": "Zm9"}, "not base64"),  # bad padding
    (lambda d: {**d, "sealed": 5}, "str"),
    (lambda d: {**d, "kind": "snapshot2"}, ""),
    (lambda d: {**d, "checkpointId": "-starts-with-a-dash"}, "checkpointId"),
    (lambda d: {**d, "checkpointId": "x" * 129}, "checkpointId"),
    (lambda d: {**d, "createdTimeMs": -1}, "createdTimeMs"),
    (lambda d: {**d, "taskName": "t" * 201}, "taskName"),
    (lambda d: {**d, "jobName": ".."}, "store key"),
    (lambda d: {k: v for k, v in d.items() if k != "createdTimeMs"}, "createdTimeMs"),
    (lambda d: {**d, "schemaVersion": "3"}, "schemaVersion"),
], ids=["bang", "padding", "not text", "kind", "id dash", "id long", "negative time", "long task", "dot-dot job",
        "no time", "version text"])
def test_a_defective_envelope_is_a_corrupt_record(change, why):
    with pytest.raises(CorruptIndexError, match=rf"corrupt checkpoint record log-7: .*{why}"):
        Checkpoint.from_bytes(json.dumps(change(valid())).encode(), source="log-7")


def test_decode_itself_raises_value_errors():
    with pytest.raises(ValueError, match="the sealed body is not base64"):
        SealedRecord.decode(json.dumps({**valid(), "sealed": "Zm9v!"}).encode())
    with pytest.raises(msgspec.ValidationError):
        SealedRecord.decode(json.dumps({**valid(), "generation": 0}).encode())


def test_a_body_up_to_the_record_limit_is_accepted_and_one_past_it_refused():
    at_limit = {**valid(), "sealed": "A" * (MAX_RECORD_BYTES - 400)}
    assert isinstance(SealedRecord.decode(json.dumps(at_limit).encode()), SealedRecord)
    longest = {**valid(), "sealed": "A" * MAX_RECORD_BYTES}
    assert len(SealedRecord.decode(json.dumps(longest).encode()).sealed) == MAX_RECORD_BYTES
    with pytest.raises(msgspec.ValidationError):
        SealedRecord.decode(json.dumps({**valid(), "sealed": "A" * (MAX_RECORD_BYTES + 4)}).encode())
