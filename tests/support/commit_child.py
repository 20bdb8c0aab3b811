"""Test child: a writer of delta records or of group records, as a real process (paused by ``pause_plugin`` or
killed by ``kill_plugin`` at a journal event, like a `blobstate` command).

``python commit_child.py CONFIG_JSON`` with ``{"mode", "url", "options", "job", "task", "store", "work_dir",
"ttl_ms", "retain", "batches"}``:

- ``mode="deltas"``: one delta record per batch id of ``batches`` (each writes the key ``b<batch>``, with the value
  ``v<batch>`` or, given, ``value``);
- ``mode="group"``: per batch id of ``batches`` one group record of ``partitions`` delta parts (each partition
  writes ``p<partition>-b<batch>``), staged by this process, which keeps their bytes to heal a late commit from.

Prints one JSON line per committed record: ``{"generation", "checkpointId", "batchId"}``.
"""

from __future__ import annotations

import inspect
import json
import sys

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.worker import stage_changelog

try:
    from blobstate.commit.healing import HealSources
except ImportError:  # a blobstate without the one commit engine (to see a test fail before the fix)
    HealSources = dict  # type: ignore[assignment,misc]
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository


def main(config: dict) -> None:
    key = StoreKey(config["job"], config["task"], config["store"])
    repo = Repository.open(config["url"], storage_options=config.get("options") or {}, create=True)
    with StoreCommitter(key, repo, work_dir=config["work_dir"], ttl_ms=config["ttl_ms"],
                        retain=config.get("retain", 3)) as committer:
        for batch in config["batches"]:
            if config["mode"] == "deltas":
                data = changelog.encode([(changelog.PUT, f"b{batch}", config.get("value", f"v{batch}"))])
                cp = DeltaCommitter(committer).commit_changelog(data, batch_id=batch, query_id="q").checkpoint
            else:
                n = config["partitions"]
                parts, kept = [], {}
                for p in range(n):
                    data = changelog.encode([(changelog.PUT, f"p{p}-b{batch}", f"v{batch}")])
                    entry = stage_changelog(repo, key, partition=p, batch_id=batch, data=data,
                                            ttl_ms=config["ttl_ms"])
                    parts.append(entry)
                    kept[entry.blob_id] = data
                groups = GroupCommitter(committer, num_partitions=n)
                heal = {"sources": HealSources(kept)} if "sources" in inspect.signature(groups.commit).parameters \
                    else {}  # (a blobstate without the one commit engine: the same commit, nothing to heal from)
                cp = groups.commit(parts, batch_id=batch, query_id="q", **heal)
            print(json.dumps({"generation": cp.generation, "checkpointId": cp.checkpoint_id, "batchId": batch}),
                  flush=True)
    repo.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
