#!/usr/bin/env bash
# Install what the documentation site's build needs (tests/project/test_docs_site.py runs `mkdocs build --strict`):
# the `docs` extra (MkDocs, Material, mkdocstrings, include-markdown). Pure Python, from the package index, at the
# extra's own bounds. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" -m pip install --quiet --disable-pip-version-check -e ".[docs]"
