"""MkDocs hook: a broken Markdown table is a build warning (an error under ``mkdocs build --strict``).

Markdown renders a broken table without complaint: rows cut off from their header by a paragraph become a
paragraph of pipes (docs/plugins.md's "Registration records" table was, issue 43), and a row with a cell too many
or too few loses or invents a cell. This hook reads each page's Markdown (after include-markdown) and warns, with
the page and line, for a row outside any table and for a row whose cell count is not its header's.

It also renders ``\\|`` inside a table's code spans as ``|``: GitHub needs the escape there (``--store-type
rocksdb\\|dir``), Python-Markdown does not (a pipe in a code span is not a cell separator) and would print the
backslash.
"""

from __future__ import annotations

import logging
import re
from typing import Any

log = logging.getLogger("mkdocs.hooks.tables")  # under "mkdocs": counted by --strict
DELIMITER = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")


def cells(row: str) -> int:
    """The number of cells of a table row: ``|`` separators outside code spans, escaped ones (``\\|``) not."""
    text = re.sub(r"`[^`]*`", "code", row.replace("\\|", "")).strip()
    return len(text.strip("|").split("|"))


def table_problems(markdown: str) -> list[str]:
    """``"line N: what"`` for every broken table row of ``markdown`` (fenced code blocks skipped)."""
    problems: list[str] = []
    lines = markdown.splitlines()
    fence = None
    header = 0  # the cell count of the table being read, 0 outside a table
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        marker = re.match(r"^(`{3,}|~{3,})", stripped)
        if marker and (fence is None or stripped.startswith(fence)):
            fence = None if fence else marker.group(1)
            header = 0
            continue
        if fence or not stripped.startswith("|"):
            header = 0
            continue
        if header:
            if cells(stripped) != header:
                problems.append(f"line {number}: a row of {cells(stripped)} cells in a table of {header}")
            continue
        following = lines[number].strip() if number < len(lines) else ""
        if DELIMITER.match(following):
            header = cells(stripped)  # the delimiter row is read next as a row of the table
            continue
        if not DELIMITER.match(stripped):
            problems.append(f"line {number}: a table row outside any table (cut off from its header?)")
    return problems


def unescape_pipes(markdown: str) -> str:
    """``markdown`` with ``\\|`` made ``|`` inside the code spans of table rows (fenced code left as it is)."""
    out, fence = [], False
    for line in markdown.split("\n"):
        if line.strip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence and line.strip().startswith("|"):
            line = re.sub(r"`[^`]*`", lambda span: span.group(0).replace("\\|", "|"), line)
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """MkDocs event: warn about every broken table of the page, and unescape the pipes of its code spans."""
    for problem in table_problems(markdown):
        log.warning("%s: %s", page.file.src_uri, problem)
    return unescape_pipes(markdown)
