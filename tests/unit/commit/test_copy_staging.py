"""``blobstate.commit.copy_staging``: a copy's staged chunks hold the plain bytes they were given back, and from an
encrypted source none of them on disk, a retried write (a seek back to its mark) included."""

from __future__ import annotations

import os

import pytest

from blobstate.commit.copy_staging import Staging
from blobstate.local.checksum import Crc32cSink, crc32c_bytes
from blobstate.plugin.interfaces import FileRange

pytest.importorskip("cryptography")


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
def test_a_chunk_reads_back_what_was_written_and_a_sealed_one_is_never_in_the_clear(tmp_path, sealed):
    data = b"route-000123=7\n" * 5000 + os.urandom(33)
    with Staging(str(tmp_path), sealed=sealed) as staging:
        chunk = staging.chunk()
        with chunk.writer() as fh:
            sink = Crc32cSink(fh)
            sink.mark(len(data))
            sink.write(data[:40_001])
            sink.seek(0)  # a retried download starts the chunk again
            sink.write(data[:17])
            sink.write(data[17:])
        assert chunk.size == len(data) and sink.crc32c == crc32c_bytes(data)
        assert b"".join(chunk.pieces()) == data
        stored = open(chunk.path, "rb").read()
        assert (b"route-000123" in stored) is not sealed
        with chunk.source() as source:
            assert isinstance(source, bytes if sealed else FileRange)
            if sealed:
                assert source == data
        chunk.remove()
        chunk.remove()  # idempotent
        assert os.listdir(staging.path) == []
    assert os.listdir(tmp_path) == []  # the staging directory and its lock went at the end
