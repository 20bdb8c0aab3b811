#!/usr/bin/env bash
# Install what the benchmark harness (bench/) and its smoke test need on a fresh Debian 12 machine.
# Idempotent and non-interactive.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
need_apt=()
command -v restic >/dev/null 2>&1 || need_apt+=(restic)
command -v rclone >/dev/null 2>&1 || need_apt+=(rclone)
command -v ldb >/dev/null 2>&1 || command -v rocksdb_ldb >/dev/null 2>&1 || need_apt+=(rocksdb-tools)
[ -x /usr/bin/time ] || need_apt+=(time)
if [ "${#need_apt[@]}" -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

PY="${PYTHON:-python3}"
"$PY" -m pip install --quiet matplotlib psutil "moto[server]>=5" "s3fs>=2023.6" boto3 "obstore>=0.8"
# bench/transports.py also needs the Azure and GCS clients and emulators: .ci/install-cloud.sh installs them.
