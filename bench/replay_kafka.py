"""Restore by changelog replay from a real Kafka broker, the way Samza restored a store before blob stores: a
consumer (kafka-python, ``api_version=(0, 9)``, no consumer group) assigned every partition of the compacted
changelog topic reads it from the beginning to the end offset it had when the restore started, and writes every
record into an empty RocksDB in one WriteBatch per poll (at most 500 records, Kafka's ``max.poll.records``
default; a ``None`` value, a tombstone, is a delete), then flushes. kafka-python checks every record's CRC
(``check_crcs``, its default).

``python -m bench.replay_kafka BOOTSTRAP TOPIC DEST_DB`` prints the number of records replayed. Exits non-zero
(``TimeoutError``) when no record arrives for ``STALL_S`` seconds before the end offsets are reached.
"""

from __future__ import annotations

import sys
import time

from bench.state import db_options

API_VERSION = (0, 9)
POLL_RECORDS = 500
STALL_S = 60.0


def replay(bootstrap: str, topic: str, dest_dir: str) -> int:
    """Replay ``topic`` on ``bootstrap`` (``host:port``) into a new RocksDB at ``dest_dir``; returns the count.

    Raises ``ValueError`` if the topic has no partitions, ``TimeoutError`` on a stall of ``STALL_S`` seconds.
    """
    from kafka import KafkaConsumer, TopicPartition
    from rocksdict import Rdict, WriteBatch

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=API_VERSION, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             max_poll_records=POLL_RECORDS)
    db = Rdict(dest_dir, options=db_options())
    count = 0
    try:
        partitions = sorted(consumer.partitions_for_topic(topic))
        if not partitions:
            raise ValueError(f"topic {topic!r} has no partitions on {bootstrap}")
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        remaining = {tp for tp in tps if consumer.position(tp) < end[tp]}
        last_progress = time.monotonic()
        while remaining:
            polled = consumer.poll(timeout_ms=1000, max_records=POLL_RECORDS)
            if not polled:
                if time.monotonic() - last_progress > STALL_S:
                    raise TimeoutError(f"no record for {STALL_S} s; {count} replayed, end offsets {end}")
                continue
            wb = WriteBatch(raw_mode=True)
            for tp, records in polled.items():
                for rec in records:
                    if rec.offset >= end[tp]:  # produced after the restore started: not part of it
                        continue
                    if rec.value is None:
                        wb.delete(rec.key)
                    else:
                        wb.put(rec.key, rec.value)
                    count += 1
            db.write(wb)
            last_progress = time.monotonic()
            remaining = {tp for tp in remaining if consumer.position(tp) < end[tp]}
        db.flush(True)
    finally:
        db.close()
        consumer.close()
    return count


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m bench.replay_kafka BOOTSTRAP TOPIC DEST_DB", file=sys.stderr)
        return 2
    print(replay(argv[0], argv[1], argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
