"""``blobstate.spark.stateful.driver.entry``'s checks made before any Spark call: pyspark's version (Spark's
``StatefulProcessor`` API is pyspark >= 4.0: an older one gets one line naming what is needed, exit 2), and what
Spark Connect cannot run (an initial state), refused in one line."""

from __future__ import annotations

import pytest

from blobstate.errors import ConfigurationError, MissingDependencyError
from blobstate.spark.stateful.driver.entry import refuse_under_connect, require_pyspark


@pytest.mark.parametrize("version", ["3.5.3", "3.4.0", "2.4.8"])
def test_pyspark_before_4_is_refused_in_one_line(version):
    with pytest.raises(MissingDependencyError) as info:
        require_pyspark(version)
    message = str(info.value)
    assert "\n" not in message and "pyspark >= 4.0" in message and f"pyspark {version}" in message
    assert info.value.exit_code == 2


@pytest.mark.parametrize("version", ["4.0.0", "4.3.0", "4.1.0.dev1", "5.0"])
def test_pyspark_4_and_later_pass(version):
    require_pyspark(version)


def test_the_installed_pyspark_passes():
    pytest.importorskip("pyspark")
    require_pyspark()


ConnectSession = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})  # is_connect reads the type
ClassicSession = type("SparkSession", (), {"__module__": "pyspark.sql.session"})


def test_an_initial_state_under_spark_connect_is_refused_in_one_line():
    with pytest.raises(ConfigurationError) as info:
        refuse_under_connect(ConnectSession(), initial_state=object())
    message = str(info.value)
    assert "\n" not in message and "initial_state" in message and "Spark Connect" in message
    assert info.value.exit_code == 2


@pytest.mark.parametrize(("session", "initial"), [(ClassicSession, object()), (ConnectSession, None)])
def test_classic_with_an_initial_state_and_connect_without_one_pass(session, initial):
    refuse_under_connect(session(), initial_state=initial)
