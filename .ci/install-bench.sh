#!/usr/bin/env bash
# Install what the benchmark harness (bench/) and its smoke test need on a fresh Debian 12 machine.
# Idempotent and non-interactive.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

need_apt=()
command -v restic >/dev/null 2>&1 || need_apt+=(restic)
command -v rclone >/dev/null 2>&1 || need_apt+=(rclone)
command -v ldb >/dev/null 2>&1 || command -v rocksdb_ldb >/dev/null 2>&1 || need_apt+=(rocksdb-tools)
[ -x /usr/bin/time ] || need_apt+=(time)
apt_install ${need_apt[@]+"${need_apt[@]}"}

"$PY" -m pip install --quiet matplotlib psutil "moto[server]>=5" "s3fs>=2023.6" boto3 "obstore>=0.8"
# bench/transports.py also needs the Azure and GCS clients and emulators: .ci/install-cloud.sh installs them.
