"""TTL rules (Spark's) and the expiry index's range."""

from __future__ import annotations

import pytest

from blobstate.model.changelog import StagedWrites
from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.store import Store
from blobstate.spark.processor.ttl import TtlIndex, expired, expiry, ttl_duration


def test_ttl_rules():
    assert ttl_duration(None, name="v", time_mode="None") is None
    assert ttl_duration(0, name="v", time_mode="EventTime") is None  # zero is Spark's TTLConfig.NONE
    assert ttl_duration(500, name="v", time_mode="ProcessingTime") == 500
    with pytest.raises(StateVariableError, match="positive"):
        ttl_duration(-1, name="v", time_mode="ProcessingTime")
    for mode in ("None", "EventTime"):
        with pytest.raises(StateVariableError, match="ProcessingTime"):
            ttl_duration(500, name="v", time_mode=mode)
    with pytest.raises(StateVariableError, match="int"):
        ttl_duration(1.5, name="v", time_mode="ProcessingTime")


def test_expiry_is_processing_time_plus_ttl_and_expired_from_that_instant():
    assert expiry(1000, 500) == 1500 and expiry(1000, None) is None
    assert not expired(1500, 1499) and expired(1500, 1500) and expired(1500, 9999) and not expired(None, 10**15)


def test_due_is_the_index_up_to_the_processing_time_in_expiry_order(db):
    index = TtlIndex(Store(StagedWrites(db)), 7)
    index.move(b"k3", None, 3000)
    index.move(b"k1", None, 1000)
    index.move(b"k2", None, 2000)
    index.move(b"k2", 2000, 2500)  # an update moves the entry
    other = TtlIndex(index.store, 8)
    other.move(b"x", None, 1)
    assert index.due(2499) == [(1000, b"k1")]
    assert index.due(2500) == [(1000, b"k1"), (2500, b"k2")]
    assert index.entries() == [(1000, b"k1"), (2500, b"k2"), (3000, b"k3")]
    assert index.earliest() == 1000 and other.earliest() == 1
    index.move(b"k1", 1000, None)
    assert index.due(10**12) == [(2500, b"k2"), (3000, b"k3")]
