"""``blobstate.local.held``: held directories are removed by the sweep of the next process only once no live
process holds them, and only of the kinds asked for (a store's work directory holds other directories too)."""

from __future__ import annotations

import os

from blobstate.local import held


def test_an_abandoned_directory_is_swept_and_a_held_one_is_left(tmp_path):
    with held.new_held_dir(str(tmp_path), held.COPY_STAGING) as live:
        abandoned = tmp_path / f"{held.COPY_STAGING}dead"
        abandoned.mkdir()
        (abandoned / "chunk").write_bytes(b"x")  # its lock file is gone with its process: nobody holds it
        (tmp_path / "checkpoints").mkdir()  # a work directory's own folder: never a held kind
        assert held.sweep_work_dir(str(tmp_path)) == [str(abandoned)]
        assert os.path.isdir(live) and (tmp_path / "checkpoints").is_dir() and not abandoned.exists()
    assert sorted(os.listdir(tmp_path)) == ["checkpoints"]  # the held one and its lock file went at its end


def test_a_sweep_stops_at_its_limit(tmp_path):
    for i in range(5):
        (tmp_path / f"{held.COPY_STAGING}{i}").mkdir()
    assert len(held.sweep(str(tmp_path), f"{held.COPY_STAGING}*", limit=2)) == 2
    assert len(held.sweep_work_dir(str(tmp_path))) == 3
