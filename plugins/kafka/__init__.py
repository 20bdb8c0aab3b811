"""The Kafka checkpoint log (``kafka://HOST:PORT[,HOST:PORT...]/TOPIC?option=value``), on kafka-python.

Samza keeps its checkpoints in a Kafka topic; this log does the same for blobstate's checkpoint records.

Modules: ``config`` (the URL and its options, no I/O), ``acceptance`` (the acceptance rule: a pure fold of a
partition, and the append decisions), ``admin`` (creating or checking the topic), ``client`` (the kafka-python
clients: reading a partition, producing, transactions), ``log`` (``KafkaCheckpointLog``, the contract).

Layout. One compacted topic holds the checkpoints of many stores. A store's records all go to the partition chosen
by its store key (``job/task/store``) with Kafka's default partitioner (murmur2 of the key, so Java clients agree),
which keeps them in one total order. A record's key is ``job/task/store/<generation, 20 digits>/<token>`` (a fresh
token per produce) and its value is ``Checkpoint.to_bytes()``. Compaction never drops a record by itself (every key
is unique): ``prune`` tombstones the generations it retires and the rejected records, outside any transaction.

Fencing. Every reader applies the acceptance rule (``acceptance``) to the partition order: per store key the first
record is accepted, then only generation last + 1; everything else is rejected for good. That alone fences writers
on brokers without transactions (0.9, 0.10). Where the broker has them (>= 0.11) and ``transactional`` is ``auto``
(default) or ``true``, each store's appends go through a transactional producer whose transactional id is
``blobstate-<job/task/store>``: its ``init_transactions`` fences every older producer of the store (the broker
refuses a zombie's records by producer epoch, Kafka's KIP-98) and readers use ``read_committed``. An append whose
answer never came raises ``AppendOutcomeUnknown``; re-appending the same checkpoint answers for certain
(``log`` explains how).

What blobstate creates: with ``topic_admin=auto`` on a broker with an admin API (>= 0.10.1), the topic, if it is
missing, with ``partitions`` (default 1), ``replication_factor`` (default 1) and ``cleanup.policy=compact``,
nothing else; records and tombstones; transactional ids ``blobstate-<job/task/store>``. Never consumer groups
(readers assign partitions; no offsets are committed) and never other topics. On 0.9 (no admin API), or with
``topic_admin=none``, the topic must exist.

What blobstate expects of a production topic and cluster (Kafka's documented settings):

- ``cleanup.policy=compact``, never ``delete`` or ``compact,delete``: time or size retention would drop the
  checkpoints of a store that has not committed for a while. ``delete.retention.ms`` (tombstones, default 1 day)
  and ``min.compaction.lag.ms`` may stay at their defaults.
- Replication 3 (``replication_factor=3`` in the URL when blobstate creates it) with ``min.insync.replicas=2``:
  blobstate's producers always use ``acks=all``, so an append (the commit point) is acknowledged only once two
  replicas hold it; ``unclean.leader.election.enable=false`` (the default since 0.11), or a lagging replica could
  become leader and lose an acknowledged checkpoint.
- A fixed partition count: adding partitions moves store keys to other partitions, where their history is not.
- ``auto.create.topics.enable`` is not relied on: blobstate creates or checks the topic through the admin API.
- Transactions (>= 0.11): the coordinator's state topic replicated like the data
  (``transaction.state.log.replication.factor=3``, ``transaction.state.log.min.isr=2``);
  ``transaction.max.timeout.ms`` at least blobstate's ``transaction_timeout_ms`` (default 60000). A writer stopped
  in the middle of an append leaves its transaction open, which holds ``read_committed`` readers of that partition
  at the last stable offset until ``transaction_timeout_ms`` passes or the store's next writer starts: keep it short.
  ``transactional.id.expiration.ms`` (default 7 days) may stay: a store idle for longer gets a new producer id, and
  the acceptance rule still fences.
- ACLs for blobstate's principal: Read, Write and Describe on the topic; Write and Describe on the transactional
  ids with prefix ``blobstate-`` (a prefixed ACL); Create only if blobstate is to create the topic.

Tested here (``tests/test_kafka_*.py``) against Apache Kafka 0.9.0.1 (acceptance-rule path) and tansu 0.6.0
(Kafka protocol 3.9: transactional path, admin API); docs/backends.md lists what each proved and what is
unproven, and where tansu differs from Kafka.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from blobstate.plugins.kafka.config import KafkaLogConfig, parse_kafka_url
    from blobstate.plugins.kafka.log import KafkaCheckpointLog, open_kafka_log

__all__ = ["KafkaCheckpointLog", "KafkaLogConfig", "open_kafka_log", "parse_kafka_url"]
#: Each public name and the module it lives in, imported at its first use: importing the package, or ``config``
#: through it, loads no kafka-python (``log`` and ``client`` do).
_EXPORTS = {"KafkaLogConfig": "config", "parse_kafka_url": "config", "KafkaCheckpointLog": "log",
            "open_kafka_log": "log"}


def __getattr__(name: str) -> object:
    """``blobstate.plugins.kafka.<name>`` from its module (``ImportError`` without kafka-python for ``log``'s)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
