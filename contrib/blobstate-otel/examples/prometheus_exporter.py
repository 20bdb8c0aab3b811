"""Serve blobstate's commit metrics to Prometheus, through OpenTelemetry's Prometheus exporter.

    pip install "blobstate-otel[prometheus]"
    python prometheus_exporter.py /data/counts --repo s3://bucket/state --port 9464 --every 60

Sets an OpenTelemetry SDK ``MeterProvider`` whose reader is the Prometheus exporter, serves ``/metrics`` on
``--port`` with prometheus_client, and backs up STORE_DIR every ``--every`` seconds (a stand-in for your job: in a
Spark job, set the provider the same way before ``blobstate.spark.register``). Prometheus then scrapes::

    blobstate_commits_total{blobstate_outcome="committed",blobstate_store_key="default/0/counts"} 3.0
    blobstate_commit_duration_seconds_bucket{...}
    blobstate_commit_uploaded_bytes_total{blobstate_store_key="default/0/counts"} 1.2e+07
    blobstate_last_successful_commit_time_seconds{blobstate_store_key="default/0/counts"} 1.7e+09

An alert on a stale store: ``time() - blobstate_last_successful_commit_time_seconds > 600``.
"""

from __future__ import annotations

import argparse
import time

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store_dir")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9464)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between backups")
    parser.add_argument("--backups", type=int, default=0, help="stop backing up after this many (0: never)")
    args = parser.parse_args(argv)

    start_http_server(port=args.port, addr=args.host)
    metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))

    import blobstate  # after the provider is set: the plugin's instruments come from it

    done = 0
    while True:
        if not args.backups or done < args.backups:
            result = blobstate.backup(args.store_dir, repo=args.repo)
            done += 1
            print(f"committed {result.checkpoint.store_key} generation {result.checkpoint.generation}", flush=True)
        time.sleep(args.every)


if __name__ == "__main__":
    main()
