"""The short version of ``bench/many_stores.py`` (``list``, ``stats``, ``verify``, ``gc --dry-run`` of a repository
of many stores on the counting moto server): every verb sees every store, and the requests each makes grow with
what it must read (one record and one index per snapshot, the blobs ``verify`` checks), never with a listing per
store: one listing of the records (``list``, ``verify``), one more of the whole repository (``stats``, ``gc``: its
TTLs come from that same listing, and a remote store has no temporaries to list). Run again with this host's cache
of immutable objects warm (``blobstate.local.object_cache``: records by their listed MD5, indexes by their records'
CRC32C), ``list`` and ``gc --dry-run`` make no request per store at all: the listings and the repository's marker.
The times are the benchmark's, never asserted here."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

STORES, CHECKPOINTS, FILES = 24, 2, 2


def test_repository_wide_verbs_list_once_per_kind_of_object_whatever_the_number_of_stores(tmp_path):
    from bench import many_stores

    out = tmp_path / "many.json"
    doc = many_stores.main(["--stores", str(STORES), "--checkpoints", str(CHECKPOINTS), "--files", str(FILES),
                            "--concurrency", "4", "--out", str(out)])  # main checks every verb's answer
    assert json.loads(out.read_text())["stores"] == STORES
    verbs = doc["verbs"]
    reads = STORES * CHECKPOINTS * 2 + 1  # a record and an index per snapshot, and the repository's marker
    assert verbs["list"]["requests"] == {"GET": reads, "LIST": 1, "total": reads + 1}, verbs["list"]
    assert verbs["stats"]["requests"]["GET"] == reads and verbs["stats"]["requests"]["LIST"] <= 2, verbs["stats"]
    # every record, and the latest snapshot's index and blobs, each once
    assert verbs["verify"]["requests"]["GET"] == 1 + STORES * CHECKPOINTS + STORES * (1 + FILES), verbs["verify"]
    assert verbs["verify"]["requests"]["LIST"] == 1, verbs["verify"]
    assert verbs["gc --dry-run"]["requests"]["GET"] == reads, verbs["gc --dry-run"]
    assert verbs["gc --dry-run"]["requests"]["LIST"] <= 2, verbs["gc --dry-run"]  # objects with TTLs, records
    # warm: every record and index comes from the local cache, checked against the listing and the records
    assert verbs["list (warm)"]["requests"] == {"GET": 1, "LIST": 1, "total": 2}, verbs["list (warm)"]
    assert verbs["gc --dry-run (warm)"]["requests"]["GET"] == 1, verbs["gc --dry-run (warm)"]
    assert verbs["gc --dry-run (warm)"]["requests"]["LIST"] <= 2, verbs["gc --dry-run (warm)"]
    assert all(v["storeCalls"] is not None for v in verbs.values())  # -v reports each verb's store calls
