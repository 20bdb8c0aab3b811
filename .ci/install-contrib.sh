#!/usr/bin/env bash
# Install steps for the third-party plugin tests (tests/contract/test_contrib_sqlite.py, tests/contract/test_plugins_cli.py):
# the tests pip-install contrib/blobstate-sqlite themselves with --no-build-isolation (offline, fast), which needs
# setuptools >= 64 and wheel in the environment. Idempotent.
set -euo pipefail
"${PYTHON:-python3}" -m pip install --quiet --disable-pip-version-check "setuptools>=64" "wheel"
