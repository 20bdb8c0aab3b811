#!/usr/bin/env bash
# Install what the cloud blob store tests (tests/contract/test_blobstore_conformance.py, test_cloud_ttl.py,
# test_cloud_e2e.py) need on a fresh Debian 12 machine:
#   - the Python extras s3, gcs, azure (s3fs, boto3, obstore, gcsfs, adlfs, azure-storage-blob) and the emulators
#     moto[server] (S3) and gcp-storage-emulator (GCS),
#   - node/npm (apt) and azurite (Azure Blob emulator, npm) into a cache dir.
# Idempotent and non-interactive. The azurite prefix is $BLOBSTATE_AZURITE_PREFIX (default
# ~/.cache/blobstate/azurite); tests/support/cloud_servers.py looks in the same place (or azurite-blob on PATH).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

need_apt=()
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
apt_install ${need_apt[@]+"${need_apt[@]}"}

"$PY" -m pip install --quiet "s3fs>=2023.6" boto3 "obstore>=0.8" "gcsfs>=2023.6" "adlfs>=2023.8" "azure-storage-blob>=12.17" \
    "moto[server]>=5" gcp-storage-emulator

# Pinned: azurite 3.36+ declares Node >= 21/22, Debian 12 ships Node 18; 3.35.0 declares Node >= 10.
AZURITE_VERSION=3.35.0
PREFIX="${BLOBSTATE_AZURITE_PREFIX:-$HOME/.cache/blobstate/azurite}"
if ! command -v azurite-blob >/dev/null 2>&1 && [ ! -x "$PREFIX/node_modules/.bin/azurite-blob" ]; then
    mkdir -p "$PREFIX"
    (cd "$PREFIX" && npm install --no-save --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION")
fi
