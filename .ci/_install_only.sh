#!/usr/bin/env bash
# CI on a fresh Debian 12 machine: make (or reuse) a virtual environment, install everything the tests need into it,
# then run the README's test command. Never calls sudo: system packages are installed only when running as root, and
# a missing one is named otherwise (.ci/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
export CI="${CI:-true}"  # server fixtures fail instead of skipping when their server is missing

# Debian's own Python refuses `pip install` outside a virtual environment (PEP 668): always install into one.
VENV="${BLOBSTATE_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || "${PYTHON_FOR_VENV:-python3}" -m venv "$VENV"
VENV="$(cd "$VENV" && pwd)"
export VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" PYTHON="$VENV/bin/python"

"$PYTHON" -m pip install --quiet --upgrade "pip>=23" wheel
"$PYTHON" -m pip install --quiet -e ".[all,test]"
for script in .ci/install-*.sh; do
    echo "== $script"
    bash "$script"
done

