"""Journals as committers write them, for the unit tests of the projection and the recovery planner: every event of
one commit in order (``commit_events``), and a Hypothesis strategy of several commits, each cut by a crash at any
event, interleaved in one journal (``journals``)."""

from __future__ import annotations

from hypothesis import strategies as st

from blobstate.journal import events as ev

PREFIX = "j/t/s"


def commit_events(cid: str, kind: str = "snapshot", aborted_at: int | None = None) -> list[ev.Event]:
    """Every event of one commit in the order a committer records them; ``aborted_at``: cut there by an abort."""
    blobs = (f"{PREFIX}/blobs/{cid}-1", f"{PREFIX}/blobs/{cid}-2")
    index = "" if kind == "delta" else f"{PREFIX}/indexes/{cid}.json"
    seq: list[ev.Event] = [ev.CommitStarted(cid, 1, PREFIX, 4, 9, 2, "file:///r", "", kind)]
    if kind != "delta":
        seq.append(ev.LocalCheckpointCreated(cid, 2, f"/work/checkpoints/{cid}"))
    seq += [ev.UploadsPlanned(cid, 3, blobs, index, 30), ev.BlobUploaded(cid, 4, blobs[0], 10),
            ev.BlobUploaded(cid, 5, blobs[1], 20)]
    if kind != "delta":
        seq.append(ev.IndexUploaded(cid, 6, index, 77, 100))
    seq += [ev.CheckpointAppending(cid, 7, 6, '{"record": 1}'), ev.CheckpointWritten(cid, 8, 7),
            ev.TtlRemoved(cid, 9, blobs), ev.BlobsDeleted(cid, 10, (f"{PREFIX}/blobs/old",), ("cp0",)),
            ev.LocalCheckpointsPruned(cid, 11, ()), ev.CommitCompleted(cid, 12)]
    if aborted_at is not None:
        seq = seq[:aborted_at] + [ev.CommitAborted(cid, 13, "crashed")]
    return seq


@st.composite
def journals(draw) -> tuple[dict[str, list[ev.Event]], list[ev.Event]]:
    """Several commits, each a prefix of its events (a crash cut it there), interleaved in one journal."""
    commits: dict[str, list[ev.Event]] = {}
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["snapshot", "delta"]))
        full = commit_events(f"c{i}", kind, draw(st.none() | st.integers(1, 6)))
        commits[f"c{i}"] = full[:draw(st.integers(1, len(full)))]
    queues = {cid: list(events) for cid, events in commits.items()}
    journal: list[ev.Event] = []
    while any(queues.values()):
        cid = draw(st.sampled_from(sorted(c for c, q in queues.items() if q)))
        journal.append(queues[cid].pop(0))
    return commits, journal
