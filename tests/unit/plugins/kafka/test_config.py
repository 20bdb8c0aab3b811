"""``blobstate.plugins.kafka.config``: a ``kafka://`` URL and its options parsed with no I/O. Servers and topic,
options from the query with ``storage_options`` winning, SASL credentials from the user info that never show in
``display_url`` or ``repr``, every bad value a ``ConfigurationError`` naming the option, and no option that names code
to import."""

from __future__ import annotations

import pytest

from blobstate.errors import ConfigurationError
from blobstate.plugins.kafka.config import (
    DEFAULT_TIMEOUT_MS,
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    KafkaLogConfig,
    check_topic_admin,
    parse_api_version,
    parse_kafka_url,
    parse_tristate,
)


def test_the_defaults_of_a_plain_url():
    config = parse_kafka_url("kafka://127.0.0.1:9092/checkpoints")
    assert config == KafkaLogConfig(("127.0.0.1:9092",), "checkpoints")
    assert (config.api_version, config.transactional, config.timeout_ms, config.transaction_timeout_ms,
            config.partitions, config.replication_factor, config.topic_admin, config.client_options) == (
        None, None, DEFAULT_TIMEOUT_MS, DEFAULT_TRANSACTION_TIMEOUT_MS, 1, 1, "auto", {})
    assert config.display_url == "kafka://127.0.0.1:9092/checkpoints" and config.secrets == []


def test_every_option_of_the_log_and_the_clients():
    config = parse_kafka_url("KAFKA://a:1,b:2,/t%2Ex?api_version=0.9&transactional=false&timeout_ms=500"
                             "&transaction_timeout_ms=9000&partitions=3&replication_factor=2&topic_admin=NONE"
                             "&security_protocol=SSL&ssl_cafile=/ca.pem")
    assert config.bootstrap_servers == ("a:1", "b:2") and config.topic == "t.x"
    assert (config.api_version, config.transactional, config.timeout_ms, config.transaction_timeout_ms,
            config.partitions, config.replication_factor, config.topic_admin) == ((0, 9), False, 500, 9000, 3, 2,
                                                                                    "none")
    assert config.client_options == {"security_protocol": "SSL", "ssl_cafile": "/ca.pem"}


def test_storage_options_win_over_the_query():
    admin = type("Admin", (), {"ensure_topic": lambda self, topic, **kw: None})()
    config = parse_kafka_url("kafka://h:1/t?timeout_ms=5&sasl_mechanism=PLAIN",
                             {"timeout_ms": 7, "sasl_mechanism": "SCRAM-SHA-256", "topic_admin": admin})
    assert config.timeout_ms == 7 and config.client_options["sasl_mechanism"] == "SCRAM-SHA-256"
    assert config.topic_admin is admin


def test_user_info_is_sasl_plain_and_the_password_is_never_shown():
    config = parse_kafka_url("kafka://al%40ice:p%3Ass@h:1,h2:2/t")
    assert config.client_options == {"sasl_plain_username": "al@ice", "sasl_plain_password": "p:ss",
                                     "sasl_mechanism": "PLAIN", "security_protocol": "SASL_PLAINTEXT"}
    assert config.bootstrap_servers == ("h:1", "h2:2")
    assert "p:ss" not in config.display_url + repr(config) and "ss" not in config.display_url
    assert config.secrets == ["p:ss"]
    explicit = parse_kafka_url("kafka://u:pw@h:1/t?security_protocol=SASL_SSL")
    assert explicit.client_options["security_protocol"] == "SASL_SSL"  # an explicit option is kept


def test_secrets_are_the_values_of_password_secret_and_token_options():
    config = parse_kafka_url("kafka://h:1/t", {"ssl_password": "a", "sasl_oauth_token": "b", "client_secret": "c",
                                                "ssl_cafile": "/ca", "empty_password": ""})
    assert sorted(config.secrets) == ["a", "b", "c"]


@pytest.mark.parametrize("url, why", [
    ("http://h:1/t", r"not a kafka:// URL: http://"),
    ("kafka:///t", "HOST:PORT"), ("kafka://h:1", "TOPIC"), ("kafka://h:1/", "TOPIC"), ("kafka://h:1/a/b", "TOPIC"),
    ("kafka://,/t", "HOST:PORT"),
])
def test_a_url_without_servers_or_a_topic_is_refused(url, why):
    with pytest.raises(ConfigurationError, match=why) as info:
        parse_kafka_url(url)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("option, value, why", [
    ("timeout_ms", "soon", "kafka option timeout_ms must be a whole number, got 'soon'"),
    ("timeout_ms", "0", "kafka option timeout_ms must be positive, got 0"),
    ("partitions", "-2", "kafka option partitions must be positive, got -2"),
    ("replication_factor", "1.5", "must be a whole number"),
    ("transactional", "maybe", "kafka option transactional must be auto, true or false, got 'maybe'"),
    ("api_version", "0.x", "kafka api_version must look like 0.9 or 2.8, got '0.x'"),
    ("api_version", "1..2", "must look like 0.9"),
    ("topic_admin", "my_pkg.admin:make", "kafka topic_admin must be auto or none, got 'my_pkg.admin:make': no URL "
                                         "option imports code"),
])
def test_a_bad_option_value_is_refused_naming_the_option(option, value, why):
    with pytest.raises(ConfigurationError, match=why.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        parse_kafka_url(f"kafka://h:1/t?{option}={value}")


def test_an_empty_query_value_is_no_value():
    config = parse_kafka_url("kafka://h:1/t?timeout_ms=&transactional=&api_version=")
    assert (config.timeout_ms, config.transactional, config.api_version) == (DEFAULT_TIMEOUT_MS, None, None)
    with pytest.raises(ConfigurationError, match="transactional must be auto, true or false, got ''"):
        parse_kafka_url("kafka://h:1/t", {"transactional": ""})
    with pytest.raises(ConfigurationError, match="timeout_ms must be a whole number, got ''"):
        parse_kafka_url("kafka://h:1/t", {"timeout_ms": ""})


@pytest.mark.parametrize("value, version", [(None, None), ("auto", None), ("", None), ("0.9", (0, 9)),
                                            ("2.8.1", (2, 8, 1)), ((0, 10), (0, 10)), ([3, 5], (3, 5)), (3, (3,))])
def test_api_versions(value, version):
    assert parse_api_version(value) == version


@pytest.mark.parametrize("value, result", [(None, None), ("auto", None), (" AUTO ", None), (True, True), (False, False),
                                           ("true", True), ("Yes", True), ("1", True), ("off", False), ("0", False)])
def test_tristates(value, result):
    assert parse_tristate("transactional", value) is result


def test_a_topic_admin_is_auto_none_or_an_object_with_ensure_topic():
    assert check_topic_admin(None) == "none" and check_topic_admin("Auto") == "auto"
    admin = type("A", (), {"ensure_topic": lambda self, *a, **k: None})()
    assert check_topic_admin(admin) is admin
    for bad in (5, object(), type("B", (), {"ensure_topic": "not callable"})()):
        with pytest.raises(ConfigurationError, match="an object with ensure_topic"):
            check_topic_admin(bad)


def test_a_long_code_reference_is_shown_cut():
    with pytest.raises(ConfigurationError) as info:
        check_topic_admin("x" * 500)
    assert "x" * 80 in str(info.value) and "x" * 81 not in str(info.value)


NO_KAFKA = """
import sys
sys.modules["kafka"] = None  # import kafka -> ImportError, as without the kafka extra
from blobstate.plugins.kafka.config import parse_kafka_url
import blobstate.plugins.kafka as package
assert parse_kafka_url("kafka://h:1/t").topic == "t"
assert package.parse_kafka_url is parse_kafka_url
try:
    package.open_kafka_log
except ImportError as exc:
    print("lazy:", exc)
print(sorted(m for m in sys.modules if m.startswith("blobstate.plugins.kafka")))
"""


def test_the_config_module_needs_no_kafka_python():
    """The module says it needs no kafka-python; its package imported it (through ``log``) before it could run."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", NO_KAFKA], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "lazy: import of kafka halted" in out.stdout
    assert out.stdout.splitlines()[-1] == "['blobstate.plugins.kafka', 'blobstate.plugins.kafka.config']"
