"""Every table in the documentation renders as a whole table (issue 43 item 8: a paragraph pasted into the middle of
docs/plugins.md's "Registration records" table cut it in two, its last rows shown as text). Markdown (the site's
``tables`` extension, as GitHub) makes a table of a header row, a separator row and the rows right after them; a
table row anywhere else is printed as a line of pipes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")


def broken_rows(text: str) -> list[str]:
    """The table rows of ``text`` that no table takes (outside fenced code blocks), as ``line N: row``."""
    problems = []
    lines = text.splitlines()
    fenced = False
    for n, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("|"):
            continue
        previous = lines[n - 1] if n else ""
        if previous.startswith("|"):
            continue  # a row of the table above
        following = lines[n + 1] if n + 1 < len(lines) else ""
        if previous.strip() or not SEPARATOR.match(following):
            problems.append(f"line {n + 1}: {line[:60]}")
    return problems


def test_the_check_finds_a_table_cut_by_a_paragraph():
    cut = "| a | b |\n| --- | --- |\n| 1 | 2 |\n\nA paragraph.\n| 3 | 4 |\n"
    assert broken_rows(cut) == ["line 6: | 3 | 4 |"]
    assert broken_rows("text\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n") == []


@pytest.mark.parametrize("page", sorted(p.relative_to(ROOT).as_posix() for p in [ROOT / "README.md",
                                                                                   *ROOT.glob("docs/**/*.md")]))
def test_every_table_row_belongs_to_a_table(page):
    assert broken_rows((ROOT / page).read_text(encoding="utf-8")) == []
