"""Makes ``tests/support/data/pre33-repository.tar.gz``: a ``file://`` repository written by blobstate as it was
before issue 33 (commit 4594519: nothing compressed, nothing encrypted, index schema version 2), for
``tests/e2e/test_compression.py``. It holds a dir store ``notes`` (two snapshots: a compressible text file, random
bytes, zeros in a subdirectory) and a RocksDB store ``counts`` (a snapshot of batch 0 and a delta of batch 1, whose
changelog is stored as it is), and under ``expected/`` what each restores to.

Run it with that commit's code first on the path (its package folders mapped as pyproject maps them)::

    mkdir -p /tmp/base/src /tmp/base/pkg && git archive 4594519 | tar -x -C /tmp/base/src
    for d in plugins journal spark; do ln -s ../$d /tmp/base/src/core/$d; done
    ln -s /tmp/base/src/core /tmp/base/pkg/blobstate
    PYTHONPATH=/tmp/base/pkg python tests/support/make_pre33_repository.py tests/support/data/pre33-repository.tar.gz
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tarfile
import tempfile


def main(out: str) -> None:
    import blobstate
    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.delta import DeltaCommitter
    from blobstate.model import changelog
    from blobstate.model.records import StoreKey

    assert not hasattr(blobstate, "codec"), "run this with the code of commit 4594519 (see the docstring)"
    rnd = random.Random(33)
    root = tempfile.mkdtemp(prefix="pre33-")
    repo, work, expected = (os.path.join(root, n) for n in ("repo", "work", "expected"))
    notes = os.path.join(root, "src", "notes")
    os.makedirs(os.path.join(notes, "sub"))
    lines = [f"{i:06d} route JFK-LAX delayed {rnd.randint(0, 90)} minutes\n" for i in range(3000)]
    with open(os.path.join(notes, "log.txt"), "w") as fh:
        fh.writelines(lines)
    with open(os.path.join(notes, "random.bin"), "wb") as fh:
        fh.write(rnd.randbytes(16 << 10))
    with open(os.path.join(notes, "sub", "zero.dat"), "wb") as fh:
        fh.write(bytes(8192))
    url = f"file://{repo}"
    blobstate.backup(notes, repo=url, store="notes", store_type="dir", work_base=work)
    with open(os.path.join(notes, "log.txt"), "a") as fh:
        fh.write("appended by the second snapshot\n")
    blobstate.backup(notes, repo=url, store="notes", store_type="dir", work_base=work)
    shutil.copytree(notes, os.path.join(expected, "notes"))

    from rocksdict import Rdict

    counts = os.path.join(root, "src", "counts")
    state = {f"route-{i:04d}": f"flights={rnd.randint(1, 500)} carrier=UA" for i in range(500)}
    db = Rdict(counts)
    for k, v in state.items():
        db[k] = v
    db.flush(True)
    db.close()
    with StoreCommitter(StoreKey("default", "0", "counts"), url, work_dir=os.path.join(work, "counts")) as committer:
        committer.backup(counts, batch_id=0)
        ops = [(changelog.PUT, "route-0001", "flights=999 carrier=AA"), (changelog.DELETE, "route-0002", None),
               (changelog.PUT, "route-9999", "flights=1 carrier=B6")]
        DeltaCommitter(committer).commit_changelog(changelog.encode(ops), batch_id=1)
    state.update({"route-0001": "flights=999 carrier=AA", "route-9999": "flights=1 carrier=B6"})
    del state["route-0002"]
    with open(os.path.join(expected, "counts.json"), "w") as fh:
        json.dump(state, fh, sort_keys=True)
    with tarfile.open(out, "w:gz") as tar:
        tar.add(repo, arcname="repo")
        tar.add(expected, arcname="expected")
    shutil.rmtree(root)


if __name__ == "__main__":
    main(sys.argv[1])
