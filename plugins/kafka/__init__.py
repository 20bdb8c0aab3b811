"""The Kafka checkpoint log (``kafka://HOST:PORT[,HOST:PORT...]/TOPIC?option=value``), on kafka-python.

PLACEHOLDER
"""

from blobstate.plugins.kafka.config import KafkaLogConfig, parse_kafka_url
from blobstate.plugins.kafka.log import KafkaCheckpointLog, open_kafka_log

__all__ = ["KafkaCheckpointLog", "KafkaLogConfig", "open_kafka_log", "parse_kafka_url"]
