"""Every command's summary in ``--help`` is whole (issue 43 item 8: click cut each at 45 characters, mid-sentence)
and fits one line of an 80-column terminal."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from blobstate.cli import COMMANDS, main


def _groups():
    yield ()
    for name in sorted(COMMANDS):
        if isinstance(main.get_command(None, name), click.Group):  # type: ignore[arg-type]
            yield (name,)


@pytest.mark.parametrize("path", list(_groups()), ids=lambda p: " ".join(p) or "blobstate")
def test_every_command_summary_is_whole_and_fits_80_columns(path):
    result = CliRunner().invoke(main, [*path, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines.index("Commands:") + 1
    rows = []
    for line in lines[start:]:
        if not line.startswith("  ") or line.strip().startswith("Environment"):
            break
        rows.append(line)
    assert rows
    for row in rows:
        assert not row.rstrip().endswith("..."), row
        assert len(row) <= 80, row
        assert row.startswith("  ") and not row.startswith("   "), f"a summary wrapped onto a second line: {row!r}"
