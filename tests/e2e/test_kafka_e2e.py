"""The CLI's backup/restore cycle and two ``blobstate backup`` processes racing on one store key, with ``--log`` on
each Kafka broker (0.9.0.1 and tansu 0.6.0); the scenarios are the other logs' (``tests/support/log_cycles.py``).
Each also checks which append path ran: the acceptance rule alone on 0.9 (no transaction markers in the topic),
one committed transaction per successful append on tansu (its commit marker takes an offset)."""

from __future__ import annotations

import pytest
from kafka_brokers import fresh_topic, transaction_markers
from log_cycles import backup_restore_cycle, two_writers_race


@pytest.fixture
def topic(kafka_broker):
    return fresh_topic(kafka_broker, "e2e")


def test_kafka_backup_restore_cycle_with_log(kafka_broker, topic, tmp_path):
    backup_restore_cycle(kafka_broker.url(topic), tmp_path)
    assert transaction_markers(kafka_broker, topic) == (2 if kafka_broker.transactional else 0)


def test_kafka_two_writers_race_one_wins_each_generation(kafka_broker, topic, tmp_path):
    """On tansu both processes initialise the same transactional id, so the later one fences the earlier one's
    producer; either way exactly one record per generation is accepted and one process exits 4."""
    _, winners = two_writers_race(kafka_broker.url(topic), tmp_path)
    assert len(winners) == 2
    markers = transaction_markers(kafka_broker, topic)
    if kafka_broker.transactional:
        assert markers >= len(winners)  # the winners committed; a fenced loser may have committed nothing
    else:
        assert markers == 0
