"""``blobstate.spark.stateful.driver.inputs``, the parts that need no SparkSession: no watermark without an
event-time column, a batch without the heartbeat's column passes through, and an initial state without the key
columns is refused with ``ConfigurationError`` naming them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from blobstate.errors import ConfigurationError
from blobstate.spark.stateful.driver import inputs


class _Frame(SimpleNamespace):
    """Stands in for a DataFrame's ``columns`` and ``withWatermark`` (pure column logic, no Spark)."""

    def withWatermark(self, column: str, delay: str) -> tuple[str, str]:  # noqa: N802 - Spark's name
        return column, delay


def test_no_event_time_column_means_no_watermark():
    frame = _Frame(columns=["k"])
    assert inputs.watermarked(frame, None, 5000) is frame


def test_the_watermark_delay_is_given_in_milliseconds():
    assert inputs.watermarked(_Frame(columns=["ts"]), "ts", 2500.0) == ("ts", "2500 milliseconds")


def test_a_batch_without_the_heartbeat_column_is_returned_as_it_is():
    batch = _Frame(columns=["k", "v"])
    assert inputs.without_heartbeat(batch) is batch
    assert inputs.HEARTBEAT not in batch.columns


def test_an_initial_state_without_the_key_columns_is_refused_naming_them():
    with pytest.raises(ConfigurationError, match=r"no key column\(s\) \['user'\]"):
        inputs.initial_rows(_Frame(columns=["region", "count"]), ["region", "user"])


def test_the_initial_states_other_columns_are_the_ones_renamed():
    _, columns = inputs.initial_rows(_Frame(columns=["count", "user", "seen"]), ["user"])
    assert columns == ("count", "seen")
