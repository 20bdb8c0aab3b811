"""Restore by changelog replay (the slow path Samza replaced): read a Kafka-like log of framed records, check each
record's CRC32 like a Kafka consumer does, and write the records into an empty RocksDB in batches of one poll
(500 records, Kafka's ``max.poll.records`` default), then flush.

``python -m bench.replay LOG DEST_DB`` prints the number of records replayed. Raises ``ValueError`` on a corrupt
record.
"""

from __future__ import annotations

import sys
import zlib

from bench.state import CRC, LEN, RECORD_HEAD, db_options

POLL_RECORDS = 500


def replay(log_path: str, dest_dir: str) -> int:
    from rocksdict import Rdict, WriteBatch

    db = Rdict(dest_dir, options=db_options())
    count = 0
    try:
        with open(log_path, "rb", buffering=1 << 20) as fh:
            wb = WriteBatch(raw_mode=True)
            pending = 0
            while True:
                head = fh.read(RECORD_HEAD.size)
                if not head:
                    break
                _offset, size = RECORD_HEAD.unpack(head)
                message = fh.read(size)
                if len(message) != size:
                    raise ValueError(f"truncated record at offset {_offset}")
                (crc,) = CRC.unpack_from(message, 0)
                body = memoryview(message)[CRC.size:]
                if zlib.crc32(body) != crc:
                    raise ValueError(f"CRC mismatch at offset {_offset}")
                (klen,) = LEN.unpack_from(body, 0)
                key = bytes(body[LEN.size:LEN.size + klen])
                pos = LEN.size + klen
                (vlen,) = LEN.unpack_from(body, pos)
                value = bytes(body[pos + LEN.size:pos + LEN.size + vlen])
                wb.put(key, value)
                pending += 1
                count += 1
                if pending == POLL_RECORDS:
                    db.write(wb)
                    wb = WriteBatch(raw_mode=True)
                    pending = 0
            if pending:
                db.write(wb)
        db.flush(True)
    finally:
        db.close()
    return count


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m bench.replay LOG DEST_DB", file=sys.stderr)
        return 2
    print(replay(argv[0], argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
