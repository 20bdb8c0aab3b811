"""The transports side by side on the three cloud emulators: which client moves blob bytes fastest, in how much
memory. This is the evidence for the built-in stores' transport (issue 17): obstore where it meets every contract,
the fsspec implementation elsewhere.

``python -m bench.transports [--size 256MiB] [--files 4] [--out DIR]`` starts moto (S3), azurite (Azure) and
gcp-storage-emulator (GCS) on 127.0.0.1 (the test suite's own starters, ``tests/support/cloud_servers.py``),
writes ``--files`` random files of ``--size`` in total, and for each emulator and client uploads them all into a
fresh prefix, then downloads them into an empty directory, each as a child process timed and measured like every
benchmark operation (``bench.measure``: wall time + syncfs, peak RSS). Downloads are checked byte for byte
(``verified``: the GCS emulator is known to swap objects written in quick succession). Results: ``transports.json``
and ``transports.md`` in ``--out``.

Clients (8 transfers at a time; 1 on the GCS emulator, which mixes up overlapping uploads, for every client alike):
``fsspec`` (s3fs, adlfs, gcsfs batch ``put``/``get``), ``obstore`` (files in parallel,
single PUT / streamed GET), ``rclone`` (``copy``, its defaults: 4 transfers), ``blobstate`` (the built-in store
through ``open_blob_store``: ``put_many`` and concurrent ``get``, 8 at a time, its byte budget), ``blobstate-cli``
(the whole product: ``blobstate backup --store-type dir`` of the directory and ``blobstate restore`` into an empty
one, checksums, index, journal and checkpoint record included).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))

from bench import measure  # noqa: E402
from bench.report import bar_panel  # noqa: E402
from bench.run import parse_size  # noqa: E402

CLIENTS = ("fsspec", "obstore", "rclone", "blobstate", "blobstate-cli")
BACKENDS = ("s3", "azure", "gcs")
#: (backend, client) pairs not run: obstore's GCS store reaches for Google's hosts, never the emulator
SKIP = {("gcs", "obstore")}
CONCURRENCY = 8
#: transfers at once per emulator: the GCS emulator stores another object's bytes when uploads overlap
#: (SERVERS.md), so every client runs one transfer at a time there
CONCURRENCY_ON = {"s3": CONCURRENCY, "azure": CONCURRENCY, "gcs": 1}


# -- the child: one client, one direction -----------------------------------------------------------------------
def _fsspec(backend: str, cfg: dict[str, Any]) -> Any:
    import fsspec

    protocol = {"s3": "s3", "azure": "az", "gcs": "gs"}[backend]
    return fsspec.filesystem(protocol, skip_instance_cache=True, **cfg["options"])


def _obstore(backend: str, cfg: dict[str, Any]) -> Any:
    """obstore's store on the emulator. Not for GCS: obstore's GCS store cannot be pointed at an emulator without
    a service-account file and then calls Google's own hosts (``SKIP``)."""
    from obstore.store import AzureStore, S3Store

    client = {"allow_http": True}
    if backend == "s3":
        return S3Store(cfg["bucket"], endpoint=cfg["endpoint"], access_key_id="bench", secret_access_key="bench-s",
                       region="us-east-1", virtual_hosted_style_request=False, client_options=client)
    if backend == "azure":
        return AzureStore(cfg["bucket"], account_name=cfg["account"], access_key=cfg["key"],
                          endpoint=f"{cfg['endpoint']}/{cfg['account']}", client_options=client)
    raise SystemExit(f"obstore is not measured on {backend}")


def child(backend: str, client: str, direction: str, cfg: dict[str, Any], local: str) -> None:
    """Upload every file of ``local`` to ``cfg['prefix']``, or download the prefix into ``local``."""
    prefix, names = cfg["prefix"], cfg["names"]
    workers = CONCURRENCY_ON[backend]
    if client == "fsspec":
        fs = _fsspec(backend, cfg)
        remote = [f"{cfg['bucket']}/{prefix}/{n}" for n in names]
        paths = [os.path.join(local, n) for n in names]
        if direction == "up":
            fs.put(paths, remote, batch_size=workers)
        else:
            os.makedirs(local, exist_ok=True)
            fs.get(remote, paths, batch_size=workers)
    elif client == "obstore":
        import obstore

        store = _obstore(backend, cfg)

        def one(name: str) -> None:
            key, path = f"{prefix}/{name}", os.path.join(local, name)
            if direction == "up":
                obstore.put(store, key, Path(path), use_multipart=False)
            else:
                with open(path, "wb") as fh:
                    for chunk in obstore.get(store, key).stream(min_chunk_size=8 << 20):
                        fh.write(chunk)

        os.makedirs(local, exist_ok=True)
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, names))
    elif client == "blobstate":
        from blobstate.plugin.interfaces import FileRange, PutRequest
        from blobstate.repository.backends import open_blob_store

        url = {"s3": "s3", "azure": "az", "gcs": "gs"}[backend] + f"://{cfg['bucket']}/{prefix}"
        store = open_blob_store(url, storage_options=cfg["options"], max_concurrency=workers)
        if direction == "up":
            store.put_many([PutRequest(n, FileRange(os.path.join(local, n), 0, os.path.getsize(
                os.path.join(local, n)))) for n in names])
        else:
            os.makedirs(local, exist_ok=True)

            def fetch(name: str) -> None:
                with open(os.path.join(local, name), "wb") as fh:
                    store.get(name, fh)

            store.map_concurrent(fetch, names)
    else:
        raise SystemExit(f"unknown client {client}")


# -- the parent: servers, data, measurements --------------------------------------------------------------------
def rclone_cmd(backend: str, cfg: dict[str, Any], direction: str, local: str) -> tuple[list[str], dict[str, str]]:
    env = {"RCLONE_CONFIG": os.devnull}
    if backend == "s3":
        env.update(RCLONE_CONFIG_R_TYPE="s3", RCLONE_CONFIG_R_PROVIDER="Other", RCLONE_CONFIG_R_ENV_AUTH="false",
                   RCLONE_CONFIG_R_ACCESS_KEY_ID="bench", RCLONE_CONFIG_R_SECRET_ACCESS_KEY="bench-s",
                   RCLONE_CONFIG_R_ENDPOINT=cfg["endpoint"], RCLONE_CONFIG_R_REGION="us-east-1")
    elif backend == "azure":  # rclone 1.60 reaches an emulator on another port only through a SAS URL
        from datetime import UTC, datetime, timedelta

        from azure.storage.blob import ContainerSasPermissions, generate_container_sas

        sas = generate_container_sas(cfg["account"], cfg["bucket"], account_key=cfg["key"],
                                     permission=ContainerSasPermissions(read=True, write=True, delete=True,
                                                                        list=True, add=True, create=True),
                                     expiry=datetime.now(UTC) + timedelta(hours=2))
        env.update(RCLONE_CONFIG_R_TYPE="azureblob",
                   RCLONE_CONFIG_R_SAS_URL=f"{cfg['endpoint']}/{cfg['account']}/{cfg['bucket']}?{sas}")
    else:
        env.update(RCLONE_CONFIG_R_TYPE="google cloud storage", RCLONE_CONFIG_R_ANONYMOUS="true",
                   RCLONE_CONFIG_R_ENDPOINT=f"{cfg['endpoint']}/storage/v1/", RCLONE_CONFIG_R_PROJECT_NUMBER="test",
                   RCLONE_CONFIG_R_BUCKET_POLICY_ONLY="true")
    remote = f"r:{cfg['bucket']}/{cfg['prefix']}"
    argv = ["rclone", "copy", local, remote] if direction == "up" else ["rclone", "copy", remote, local]
    if CONCURRENCY_ON[backend] < CONCURRENCY:
        argv += ["--transfers", str(CONCURRENCY_ON[backend]), "--checkers", str(CONCURRENCY_ON[backend])]
    return argv, env


def cli_cmd(backend: str, cfg: dict[str, Any], direction: str, local: str,
            work: str) -> tuple[list[str], dict[str, str]]:
    url = {"s3": "s3", "azure": "az", "gcs": "gs"}[backend] + f"://{cfg['bucket']}/{cfg['prefix']}"
    env = {"BLOBSTATE_STORAGE_OPTIONS": json.dumps(cfg["options"]),
           "BLOBSTATE_MAX_CONCURRENCY": str(CONCURRENCY_ON[backend])}
    wd = os.path.join(work, f"wd-{backend}-{direction}")
    if direction == "up":
        return ["blobstate", "backup", local, "--repo", url, "--store-type", "dir", "--store", "data", "-q",
                "--work-dir", wd], env
    return ["blobstate", "restore", local, "--repo", url, "--store", "data", "-q", "--work-dir", wd], env


def digests(directory: str) -> dict[str, str]:
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as fh:
            out[name] = hashlib.sha256(fh.read()).hexdigest()
    return out


def servers(stack: list[Any]) -> dict[str, dict[str, Any]]:
    """Start the three emulators; returns each one's client configuration (bucket made per run)."""
    import cloud_servers as cs

    from bench.s3server import S3Server

    moto = S3Server(os.path.join(tempfile.gettempdir(), "bench-transports-moto.log"))
    stack.append(moto.stop)
    az_port, gcs_port = cs.free_port(), cs.free_port()
    location = tempfile.mkdtemp(prefix="bench-azurite-")
    azurite = cs.start_server("azurite", cs._azurite_cmd(az_port, location), az_port,
                              probe=f"/{cs.AZURITE_ACCOUNT}?comp=list")
    stack.append(lambda: (cs.stop_server(azurite), shutil.rmtree(location, ignore_errors=True)))
    gcs = cs.start_server("gcs-emulator", cs._gcs_cmd(gcs_port), gcs_port, probe="/storage/v1/b?project=test")
    stack.append(lambda: cs.stop_server(gcs))
    os.environ["STORAGE_EMULATOR_HOST"] = gcs.endpoint
    conn = cs.azurite_connection_string(azurite.endpoint)
    return {
        "s3": {"endpoint": moto.endpoint,
               "options": {"endpoint_url": moto.endpoint, "key": "bench", "secret": "bench-s"}},
        "azure": {"endpoint": azurite.endpoint, "account": cs.AZURITE_ACCOUNT, "key": cs.AZURITE_KEY,
                  "options": {"connection_string": conn}},
        "gcs": {"endpoint": gcs.endpoint, "options": {"project": "test", "token": "anon",
                                                      "endpoint_url": gcs.endpoint}},
    }


def make_bucket(backend: str, cfg: dict[str, Any], name: str) -> None:
    if backend == "gcs":
        import urllib.request

        req = urllib.request.Request(f"{cfg['endpoint']}/storage/v1/b?project=test", method="POST",
                                     data=json.dumps({"name": name}).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).close()
    else:
        _fsspec(backend, cfg).mkdir(name)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.transports", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="256MiB")
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--out", default=os.path.join(REPO_ROOT, "bench", "results"))
    args = p.parse_args(argv)
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-s",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    os.environ.pop("AWS_CA_BUNDLE", None)
    work = tempfile.mkdtemp(prefix="bench-transports-")
    src = os.path.join(work, "src")
    os.makedirs(src)
    per_file = parse_size(args.size) // args.files
    names = [f"f{i:03d}" for i in range(args.files)]
    for n in names:
        with open(os.path.join(src, n), "wb") as fh:
            fh.write(os.urandom(per_file))
    want = digests(src)
    stack: list[Any] = []
    rows = []
    try:
        cfgs = servers(stack)
        for backend in args.backends.split(","):
            for client in args.clients.split(","):
                if (backend, client) in SKIP:
                    rows.append({"backend": backend, "client": client, "skipped": "cannot reach an emulator"})
                    continue
                cfg = {**cfgs[backend], "bucket": f"t-{client}-{int(time.time())}".lower(), "prefix": "data",
                       "names": names}
                make_bucket(backend, cfg, cfg["bucket"])
                row: dict[str, Any] = {"backend": backend, "client": client}
                for direction in ("up", "down"):
                    local = src if direction == "up" else os.path.join(work, f"dst-{backend}-{client}")
                    if client == "rclone":
                        cmd, env = rclone_cmd(backend, cfg, direction, local)
                    elif client == "blobstate-cli":
                        cmd, env = cli_cmd(backend, cfg, direction, local, work)
                    else:
                        cmd = [sys.executable, "-m", "bench.transports", "child", backend, client, direction,
                               json.dumps(cfg), local]
                        env = {}
                    try:
                        sample, _ = measure.run_measured(cmd, env={**os.environ, **env}, cwd=str(REPO_ROOT),
                                                         sync_path=work, timeout_s=900)
                        row[direction] = {"wall_s": round(sample.wall_s, 3),
                                          "peak_rss_mib": round(sample.peak_rss_mib, 1)}
                    except measure.BenchError as exc:
                        row[direction] = {"error": str(exc)[-300:]}
                        break
                if "wall_s" in row.get("down", {}):
                    got = digests(os.path.join(work, f"dst-{backend}-{client}"))
                    row["verified"] = sum(1 for n in names if got.get(n) == want[n])
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        for stop in reversed(stack):
            try:
                stop()
            except Exception as exc:  # noqa: BLE001 - stop the others all the same
                print(f"stopping a server failed: {exc}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    doc = {"size_bytes": per_file * args.files, "files": args.files, "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "transports.json"), "w") as fh:
        json.dump(doc, fh, indent=1)
    with open(os.path.join(args.out, "transports.md"), "w") as fh:
        fh.write(markdown(doc))
    plot(doc, os.path.join(args.out, "transports.png"))
    print(markdown(doc))
    return 0


def plot(doc: dict[str, Any], path: str) -> None:
    """Bars of MB/s per client, upload and download, one panel per emulator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mb = doc["size_bytes"] / 1e6
    backends = [b for b in BACKENDS if any(r["backend"] == b for r in doc["rows"])]
    fig, axes = plt.subplots(1, len(backends), figsize=(5.5 * len(backends), 4), squeeze=False)
    for ax, backend in zip(axes[0], backends, strict=True):
        rows = [r for r in doc["rows"] if r["backend"] == backend]
        series = {f"{d}load": [mb / r[d]["wall_s"] if "wall_s" in r.get(d, {}) else 0.0 for r in rows]
                  for d in ("up", "down")}
        bar_panel(ax, [r["client"] for r in rows], series, ylabel="MB/s (0: failed or not run)",
                  title=f"{backend} emulator, {doc['files']} files, {mb:.0f} MB")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(doc: dict[str, Any]) -> str:
    mb = doc["size_bytes"] / 1e6
    lines = [f"{doc['files']} files, {mb:.0f} MB in total; wall s (MB/s), peak RSS MiB; verified = files that came "
             "back byte for byte.", "",
             "| emulator | client | upload s (MB/s) | upload RSS | download s (MB/s) | download RSS | verified |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in doc["rows"]:
        def cell(d: dict[str, Any] | None) -> tuple[str, str]:
            if not d:
                return "–", "–"
            if "error" in d:
                return "failed", "–"
            return f"{d['wall_s']:.2f} ({mb / d['wall_s']:.0f})", f"{d['peak_rss_mib']:.0f}"

        if r.get("skipped"):
            lines.append(f"| {r['backend']} | {r['client']} | not run: {r['skipped']} | | | | |")
            continue
        up, down = cell(r.get("up")), cell(r.get("down"))
        lines.append(f"| {r['backend']} | {r['client']} | {up[0]} | {up[1]} | {down[0]} | {down[1]} | "
                     f"{r.get('verified', '–')}/{doc['files']} |")
    errors = [f"- {r['backend']} {r['client']} {d}: {r[d]['error']}" for r in doc["rows"] for d in ("up", "down")
              if "error" in r.get(d, {})]
    return "\n".join(lines + ([""] + errors if errors else [])) + "\n"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        _, _, backend_, client_, direction_, cfg_, local_ = sys.argv
        child(backend_, client_, direction_, json.loads(cfg_), local_)
        sys.exit(0)
    sys.exit(main())
