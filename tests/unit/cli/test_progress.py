"""``blobstate.cli.progress.RichProgress``: bars drawn on a terminal console (rich's own ``Console`` on a
``StringIO``, forced to be a terminal or not), silent otherwise, counting bytes and files from many threads."""

from __future__ import annotations

import io
import threading

from rich.console import Console

from blobstate.cli.progress import RichProgress
from blobstate.model.progress import NoProgress, Progress


def console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=120, color_system=None), out


def test_on_a_terminal_a_bar_counts_bytes_and_files():
    con, out = console(terminal=True)
    bar = RichProgress(con)
    assert bar.enabled
    bar.start("upload", 10 << 20, 4)
    workers = [threading.Thread(target=lambda: [bar.advance(1 << 20, 1 if i == 0 else 0) for i in range(2)])
               for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    task = bar._progress.tasks[0]
    assert (task.completed, task.total, task.fields["files"]) == (8 << 20, 10 << 20, "4/4 files")
    bar._progress.refresh()
    assert "upload" in out.getvalue() and "4/4 files" in out.getvalue()
    bar.finish()
    assert bar._progress is None
    bar.finish()  # twice: nothing
    bar.advance(5)  # after the end: nothing


def test_a_new_transfer_starts_its_file_count_again():
    con, _ = console(terminal=True)
    bar = RichProgress(con)
    bar.start("upload", 10, 2)
    bar.advance(10, 2)
    bar.finish()
    bar.start("download", 5, 3)
    bar.advance(1, 1)
    assert bar._progress.tasks[0].fields["files"] == "1/3 files"
    bar.finish()


def test_off_a_terminal_or_disabled_nothing_is_drawn():
    for con, out, enabled in [(*console(terminal=False), True), (*console(terminal=True), False)]:
        bar = RichProgress(con, enabled=enabled)
        assert not bar.enabled
        bar.start("upload", 100, 1)
        bar.advance(100, 1)
        bar.finish()
        assert out.getvalue() == "" and bar._progress is None


def test_both_implement_the_progress_protocol():
    def drive(p: Progress) -> None:
        p.start("x", 1, 1)
        p.advance(1, 1)
        p.finish()

    drive(NoProgress())
    drive(RichProgress(console(terminal=False)[0]))


def test_the_bar_fits_80_columns_in_iec_units_and_names_the_store():
    """Issue 43 item 8: the bar showed MB (the final line MiB), wrapped in an 80-column terminal, and the restore
    bar did not name the store. The bar as the live display draws it, on a clock the test moves."""
    now = [100.0]
    con, _ = console(terminal=True)
    bar = RichProgress(con, clock=lambda: now[0])
    bar.start("restore a-rather-long-job-name/0/a-store-with-a-long-name", 4 << 30, 4000)
    for _ in range(3):
        now[0] += 1
        bar.advance(1 << 29, 400)
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(bar._progress.get_renderable())
    bar.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 80, lines  # one line: nothing wrapped
    line = lines[0]
    assert line.startswith("restore a-rather-long"), line
    assert "1.5/4.0 GiB" in line and "512.0 MiB/s" in line and "1200/4000 files" in line, line
    assert " MB" not in line and " GB" not in line, line
