"""Creating the checkpoint topic: the ``TopicAdmin`` protocol and its two built-in implementations.

blobstate creates the topic only where the broker has an admin API (>= 0.10.1) and ``topic_admin`` is ``auto``:
``partitions`` and ``replication_factor`` from the URL, ``cleanup.policy=compact``, nothing else (the broker's
defaults apply to every other setting; see the package docstring for what production topics need). With
``topic_admin=none`` the admin API only checks that the topic exists: asking for a missing topic's partitions could
create it with the broker's defaults (``cleanup.policy=delete``) where the broker auto-creates topics (tansu does
even when the client asks it not to). A caller of the Python API may pass its own ``TopicAdmin`` object in
``storage_options`` (a 0.9 broker's ZooKeeper tool, say).
"""

from __future__ import annotations

from typing import Any, Protocol

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from blobstate.errors import ConfigurationError
from blobstate.plugins.kafka.config import KafkaLogConfig

ADMIN_API_SINCE = (0, 10, 1)


class TopicAdmin(Protocol):
    """Creates the checkpoint topic when it is missing (compacted). Implementations must be idempotent."""

    def ensure_topic(self, topic: str, *, partitions: int, replication_factor: int) -> None: ...


class AdminClientTopics:
    """``TopicAdmin`` on kafka-python's ``KafkaAdminClient`` (brokers >= 0.10.1): creates a compacted topic, or
    (``create=False``) only checks that it exists."""

    def __init__(self, config: KafkaLogConfig, api_version: tuple[int, ...] | None, *, create: bool = True) -> None:
        self.config = config
        self.api_version = api_version
        self.create = create

    def ensure_topic(self, topic: str, *, partitions: int, replication_factor: int) -> None:
        """Create ``topic`` with ``cleanup.policy=compact`` unless it exists. Raises ``ConfigurationError`` when
        it is missing and ``create`` is off, kafka-python's errors when the broker fails."""
        admin = KafkaAdminClient(bootstrap_servers=list(self.config.bootstrap_servers),
                                 api_version=self.api_version, request_timeout_ms=self.config.timeout_ms,
                                 **self.config.client_options)
        try:
            if topic in set(admin.list_topics()):
                return
            if not self.create:
                raise ConfigurationError(missing_topic(self.config))
            new = NewTopic(name=topic, num_partitions=partitions, replication_factor=replication_factor,
                           topic_configs={"cleanup.policy": "compact"})
            try:
                admin.create_topics([new], timeout_ms=self.config.timeout_ms)
            except TopicAlreadyExistsError:
                pass  # created by a concurrent writer
        finally:
            admin.close()


class ExistingTopicOnly:
    """``TopicAdmin`` for brokers without an admin API, or ``topic_admin=none``: the topic must exist."""

    def ensure_topic(self, topic: str, *, partitions: int, replication_factor: int) -> None:
        """Nothing to do: a missing topic is reported when its partitions are looked up."""
        return None


def missing_topic(config: KafkaLogConfig) -> str:
    """The error text for a checkpoint topic that does not exist."""
    return (f"the Kafka checkpoint topic {config.topic!r} does not exist on {config.display_url}; create it "
            f"compacted (cleanup.policy=compact), e.g. kafka-topics.sh --create --topic {config.topic} "
            "--partitions 1 --config cleanup.policy=compact")


def make_topic_admin(config: KafkaLogConfig, api_version: tuple[int, ...] | None) -> TopicAdmin:
    """The ``TopicAdmin`` the (already validated) ``topic_admin`` option asks for."""
    choice: Any = config.topic_admin
    if choice in ("auto", "none"):
        if api_version is not None and api_version >= ADMIN_API_SINCE:
            return AdminClientTopics(config, api_version, create=choice == "auto")
        return ExistingTopicOnly()
    return choice  # an object with ensure_topic, checked by config.check_topic_admin
