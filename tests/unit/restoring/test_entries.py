"""``blobstate.restoring.entries`` beyond ``test_state_entries.py`` (which checks the encoding against rocksdict's
own bytes and that a pickle is never unpickled): the shortest two's complement at every byte boundary, a malformed
payload kept as its bytes (never an error), the type names, the mode rocksdict's config file records, and the key
order a read yields from a real RocksDB."""

from __future__ import annotations

import json

import pytest
from rocksdict import Rdict

from blobstate.errors import ConfigurationError
from blobstate.restoring import entries
from blobstate.restoring.entries import Undecoded


@pytest.mark.parametrize("value, payload", [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x00\x80"), (255, b"\x00\xff"), (256, b"\x01\x00"),
    (32767, b"\x7f\xff"), (32768, b"\x00\x80\x00"), (-1, b"\xff"), (-128, b"\x80"), (-129, b"\xff\x7f"),
    (-32768, b"\x80\x00"), (-32769, b"\xff\x7f\xff"), (2**63 - 1, b"\x7f" + b"\xff" * 7),
    (-(2**63), b"\x80" + bytes(7)),
])
def test_an_int_is_its_shortest_twos_complement(value, payload):
    assert entries.encode(value) == b"\x03" + payload
    assert entries.decode(b"\x03" + payload) == value


@pytest.mark.parametrize("value, data", [
    ("", b"\x02"), ("é", b"\x02\xc3\xa9"), (b"", b"\x01"), (bytearray(b"ab"), b"\x01ab"), (True, b"\x05\x01"),
    (False, b"\x05\x00"), (1.0, b"\x04?\xf0\x00\x00\x00\x00\x00\x00"), (Undecoded(b"\x06pickle"), b"\x06pickle"),
])
def test_each_type_has_its_type_byte(value, data):
    assert entries.encode(value) == data


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\x03", b"\x04" + bytes(7), b"\x04" + bytes(9), b"\x05", b"\x05\x00\x00", b"\x02\xff\xfe",
    b"\x02\xed\xa0\x80", b"\x06anything", b"\x07", b"\xff" * 3,
], ids=["empty", "type 0", "int without payload", "short float", "long float", "bool without payload",
        "long bool", "bad utf-8", "a surrogate", "pickle", "type 7", "type 255"])
def test_a_malformed_or_unknown_payload_is_kept_as_its_bytes(data):
    value = entries.decode(data)
    assert value == Undecoded(data) and bytes(value) == data and entries.encode(value) == data
    assert entries.type_name(value) == "raw"


def test_any_bool_payload_byte_but_zero_is_true():
    assert entries.decode(b"\x05\x02") is True and entries.decode(b"\x05\x00") is False


@pytest.mark.parametrize("value, name", [("s", "str"), (b"b", "bytes"), (1, "int"), (1.5, "float"), (True, "bool"),
                                         (False, "bool"), (Undecoded(b"x"), "raw"), (bytearray(b"x"), "raw")])
def test_type_names(value, name):
    assert entries.type_name(value) == name
    assert name in entries.TYPE_NAMES


@pytest.mark.parametrize("bad", [None, [1], {"a": 1}, 1j, object()])
def test_other_types_are_refused_naming_the_type(bad):
    with pytest.raises(ConfigurationError, match=f"not {type(bad).__name__}: encode it first"):
        entries.encode(bad)


def test_a_read_yields_rocksdicts_key_order_type_first_and_ints_by_value(tmp_path):
    path = str(tmp_path / "db")
    db = Rdict(path)
    keys = [True, 2.5, -1.0, 300, -7, 0, "b", "a", b"z", b"\x00"]
    for k in keys:
        db[k] = repr(k)
    db.close()
    with entries.open_entries(path) as items:
        read = list(items)
    assert [k for k, _ in read] == [b"\x00", b"z", "a", "b", -7, 0, 300, 2.5, -1.0, True]  # floats by their bytes
    assert all(v == repr(k) for k, v in read)


def test_the_read_closes_the_store_so_a_writer_opens_it_after(tmp_path):
    path = str(tmp_path / "db")
    db = Rdict(path)
    db["k"] = "v"
    db.close()
    with entries.open_entries(path) as items:
        assert list(items) == [("k", "v")]
    writer = Rdict(path)  # would fail on the LOCK if the read had left the store open for writing
    writer["k2"] = "v2"
    writer.close()


@pytest.mark.parametrize("config, raw", [
    ({"raw_mode": False}, False), ({"raw_mode": True}, True), ({}, True), ([1, 2], True), ("not json{", True),
    (None, True),
], ids=["default mode", "raw mode", "no raw_mode", "a list", "malformed", "no file"])
def test_the_mode_is_what_rocksdicts_config_file_records_and_raw_without_one(tmp_path, config, raw):
    if config is not None:
        text = config if isinstance(config, str) else json.dumps(config)
        (tmp_path / "rocksdict-config.json").write_text(text)
    assert entries._raw_mode(str(tmp_path)) is raw
