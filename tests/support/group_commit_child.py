"""Test child: stage every partition's snapshot of batch 0 and commit them as a store's first group record (what
``blobstate spark rescale`` does). Run with ``BLOBSTATE_PLUGINS=kill_plugin`` to die at a journal event.

``python group_commit_child.py CONFIG_JSON``: ``{"url", "options", "job", "task", "store", "partitions",
"checkpoint_dir", "ttl_ms"}``; the work dir is the default one under ``BLOBSTATE_WORK_DIR``."""

from __future__ import annotations

import json
import sys

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
from blobstate.worker import stage_snapshot


def main(config: dict) -> None:
    key = StoreKey(config["job"], config["task"], config["store"])
    repo = Repository.open(config["url"], storage_options=config["options"], create=True)
    with StoreCommitter(key, repo, store_type="rocksdb", ttl_ms=config["ttl_ms"]) as committer:
        staged = [stage_snapshot(repo, key, partition=p, batch_id=0, checkpoint_dir=config["checkpoint_dir"],
                                 previous=None, ttl_ms=config["ttl_ms"]) for p in range(config["partitions"])]
        GroupCommitter(committer, num_partitions=config["partitions"]).commit(
            [s.entry for s in staged], batch_id=0, query_id="q",
            new_blob_ids=[b for s in staged for b in s.new_blob_ids])
    repo.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
