"""Compression and client-side encryption (issue 33): stored bytes and time, with and without.

``python -m bench.codec [--size 1GiB] [--compress-size 128MiB] [--runs 3] [--work DIR] [--out FILE] [--cold]
[--skip-flights] [--skip-encryption]``

**Compression** (file://, in this process through the API, page cache warm, medians of ``--runs``, the two variants
alternating so a drift of the machine's load hits both): a full backup into a fresh repository and a restore into
an empty directory on another "host" (no local checkpoint to reuse), ``BLOBSTATE_COMPRESSION=off`` against
``auto`` (the shipped default: indexes and changelogs always, each file's blobs when a sample says it pays), of

- a RocksDB of incompressible values (``bench.state``: ``os.urandom`` values, RocksDB's default options);
- a RocksDB of compressible values (JSON-like flight records) with RocksDB's own block compression (LZ4), and the
  same values without it;
- the flights state: the demo's RocksDB (per-route and per-carrier statistics of the 336,776 flights of 2013);
- the flights input: the 365 day files (CSV) as a dir store;
- the flights changelogs: one batch per day as the Spark binding encodes them; zstd's bytes and MB/s alone.

**Encryption** (``--size`` RocksDB of incompressible values, the CLI in a subprocess measured by
``bench.measure.run_measured``: wall time including a final syncfs, peak RSS): a full backup into a fresh
repository and a restore into an empty directory, plain against encrypted (a key file), alternating; page cache
warm (the CPU-bound worst case for the cipher's share) or, with ``--cold``, dropped before every operation. Plus
AES-256-GCM's and zstd's one-core throughput, which bound what either can cost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

if __package__ in (None, ""):  # ``python bench/codec.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import measure, state  # noqa: E402
from bench.report import emit  # noqa: E402
from bench.run import parse_size  # noqa: E402

VARIANTS = ("off", "auto")


def stored_bytes(repo: str) -> int:
    """Bytes the repository's objects take (everything under it: blobs, indexes, records, marker)."""
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(repo) for name in names)


def tree_bytes(path: str) -> int:
    return stored_bytes(path)


def compressible_db(db_dir: str, size_bytes: int, compression: str, seed: int = 3) -> None:
    """A RocksDB of JSON-like flight records (about 300 bytes each) adding up to ``size_bytes``, with RocksDB's
    block ``compression`` (``lz4`` or ``none``)."""
    from rocksdict import DBCompressionType, Rdict, WriteBatch

    opts = state.db_options()
    opts.set_compression_type(getattr(DBCompressionType, compression)())  # type: ignore[attr-defined]
    rnd = random.Random(seed)
    airports = ["JFK", "LGA", "EWR", "LAX", "SFO", "ORD", "ATL", "MIA", "BOS", "SEA", "DEN", "DFW"]
    carriers = ["UA", "AA", "DL", "B6", "WN", "AS", "9E", "EV", "MQ"]
    db = Rdict(db_dir, options=opts)
    try:
        i, total = 0, 0
        while total < size_bytes:
            wb = WriteBatch(raw_mode=True)
            for _ in range(state.WRITE_BATCH):
                value = json.dumps({"origin": rnd.choice(airports), "dest": rnd.choice(airports),
                                    "carrier": rnd.choice(carriers), "flight": rnd.randint(1, 6000),
                                    "tailnum": f"N{rnd.randint(100, 999)}{rnd.choice('ABCDEFUJ')}",
                                    "dep_delay": rnd.randint(-20, 300), "arr_delay": rnd.randint(-40, 320),
                                    "air_time": rnd.randint(30, 600), "distance": rnd.randint(80, 4983),
                                    "time_hour": f"2013-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}"
                                                 f"T{rnd.randint(0, 23):02d}:00:00Z",
                                    "status": rnd.choice(["on time", "delayed", "cancelled", "diverted"])}).encode()
                wb.put(state.key_of(i), value)
                total += len(value) + state.KEY_LEN
                i += 1
            db.write(wb)
        db.flush(True)
    finally:
        db.close()


def flights_db(db_dir: str, frame: Any) -> None:
    """The demo's state of a whole year, written as the demo writes it (``blobstate.spark.demo.flights``)."""
    from rocksdict import Rdict

    from blobstate.spark.demo.flights import ROWS_KEY, reference_state

    db = Rdict(db_dir)
    try:
        for key, value in reference_state(frame).items():
            db[key] = str(value) if key == ROWS_KEY else json.dumps(value)
        db.flush(True)
    finally:
        db.close()


def compare_backup_restore(name: str, make: Callable[[str], None], store_type: str, work: str,
                           runs: int) -> dict[str, Any]:
    """Stored bytes and median seconds of a full backup and a restore (another host), compression off and auto."""
    import blobstate

    src = os.path.join(work, f"{name}-src")
    shutil.rmtree(src, ignore_errors=True)
    make(src)
    out: dict[str, Any] = {"state_bytes": tree_bytes(src)}
    times: dict[str, dict[str, list[float]]] = {v: {"backup_s": [], "restore_s": [], "backup_cpu_s": [],
                                                    "restore_cpu_s": []} for v in VARIANTS}
    for run in range(runs):
        for variant in VARIANTS:
            base = os.path.join(work, f"{name}-{variant}-{run}")
            shutil.rmtree(base, ignore_errors=True)
            repo = os.path.join(base, "repo")
            os.environ["BLOBSTATE_COMPRESSION"] = variant
            try:
                t0, c0 = time.perf_counter(), time.process_time()
                blobstate.backup(src, repo=repo, store="s", store_type=store_type, work_dir=os.path.join(base, "w1"))
                times[variant]["backup_s"].append(time.perf_counter() - t0)
                times[variant]["backup_cpu_s"].append(time.process_time() - c0)
                out.setdefault(variant, {})["stored_bytes"] = stored_bytes(repo)
                t0, c0 = time.perf_counter(), time.process_time()
                blobstate.restore(os.path.join(base, "restored"), repo=repo, store="s",
                                  work_base=os.path.join(base, "w2"))
                times[variant]["restore_s"].append(time.perf_counter() - t0)
                times[variant]["restore_cpu_s"].append(time.process_time() - c0)
            finally:
                os.environ.pop("BLOBSTATE_COMPRESSION", None)
            shutil.rmtree(base, ignore_errors=True)
    for variant in VARIANTS:
        out[variant].update({k: statistics.median(v) for k, v in times[variant].items()})
    shutil.rmtree(src, ignore_errors=True)
    return out


def flights_changelogs(frame: Any) -> dict[str, Any]:
    """One changelog per day, as the demo's driver binding writes it (``update_state``: per route and carrier the
    running statistics, and the row count): plain and zstd bytes, and zstd's MB/s both ways."""
    import zstandard

    from blobstate.codec import frame as codec_frame
    from blobstate.model import changelog
    from blobstate.spark.demo.flights import ROWS_KEY, _merge

    running: dict[str, dict[str, Any]] = {}
    rows = 0
    logs = []
    for _, day in frame.groupby(["month", "day"], sort=True):
        batch: dict[str, dict[str, Any]] = {}
        for (origin, dest, carrier), group in day.groupby(["origin", "dest", "carrier"], sort=False):
            delay = group["dep_delay"].dropna()
            stats = {"flights": len(group), "departed": len(delay), "dep_delay_sum": int(delay.sum()),
                     "dep_delay_max": int(delay.max()) if len(delay) else None,
                     "cancelled": int(group["dep_time"].isna().sum()), "distance": int(group["distance"].sum())}
            for key in (f"route/{origin}-{dest}", f"carrier/{carrier}"):
                batch[key] = _merge(batch.get(key), stats)
        ops = []
        for key, stats in batch.items():
            running[key] = _merge(running.get(key), stats)
            ops.append((changelog.PUT, key, json.dumps(running[key], sort_keys=True)))
        rows += len(day)
        ops.append((changelog.PUT, ROWS_KEY, str(rows)))
        logs.append(changelog.encode(ops))
    plain = sum(map(len, logs))
    t0 = time.perf_counter()
    packed = [codec_frame.encode("j/t/s/blobs/" + "0" * 32, log, compress=True, cipher=None) for log in logs]
    pack_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for blob in packed:
        zstandard.ZstdDecompressor().decompress(blob)
    unpack_s = time.perf_counter() - t0
    return {"batches": len(logs), "plain_bytes": plain, "zstd_bytes": sum(map(len, packed)),
            "median_plain_bytes": statistics.median(map(len, logs)),
            "compress_mb_s": plain / pack_s / 1e6, "decompress_mb_s": plain / unpack_s / 1e6}


def one_core_throughput(size: int = 64 << 20) -> dict[str, float]:
    """MB/s of one core: AES-256-GCM both ways (``size`` bytes, ``cryptography``), zstd level 3 on incompressible
    and on text bytes (the sample decides which a blob is)."""
    import zstandard

    from blobstate.codec.cipher import ObjectCipher, new_key

    data = os.urandom(size)
    cipher = ObjectCipher(new_key(), "bench")
    out = {}
    t0 = time.perf_counter()
    nonce, enc = cipher.encryptor("x", b"h")
    body = enc.update(data) + enc.finalize()
    out["aes_gcm_encrypt_mb_s"] = len(data) / (time.perf_counter() - t0) / 1e6
    dec, check = cipher.decryptor("x", b"h", nonce)
    t0 = time.perf_counter()
    dec.update(body)
    check(enc.tag)
    out["aes_gcm_decrypt_mb_s"] = len(data) / (time.perf_counter() - t0) / 1e6
    text = b"".join(b"%06d route JFK-LAX carrier UA delayed %d minutes\n" % (i, i % 97) for i in range(size // 160))
    for label, sample in (("incompressible", data[:size // 4]), ("text", text)):
        t0 = time.perf_counter()
        zstandard.ZstdCompressor(level=3).compress(sample)
        out[f"zstd3_{label}_mb_s"] = len(sample) / (time.perf_counter() - t0) / 1e6
    return out


def encryption_cost(size: int, keys: int, work: str, runs: int, cold: bool, backend: str = "file") -> dict[str, Any]:
    """Median wall and CPU seconds and peak RSS of a full backup and a restore, plain and encrypted, through the CLI,
    into a ``backend`` repository (``file`` or ``s3``: the benchmark's counting moto server)."""
    s3 = None
    if backend == "s3":
        from bench.s3server import S3Server

        s3 = S3Server(os.path.join(work, "moto.log"))
        s3.fs().mkdir("codec")
    try:
        return _encryption_cost(size, keys, work, runs, cold, s3)
    finally:
        if s3 is not None:
            s3.stop()


def _setup(work: str, variant: str, run: int, key_file: str, s3: Any) -> tuple[str, str, str, dict[str, str]]:
    """``(scratch dir, repository URL, restore destination, environment)`` of one variant's run."""
    base = os.path.join(work, f"enc-{variant}-{run}")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    repo, dest = os.path.join(base, "repo"), os.path.join(base, "restored")
    env = {k: v for k, v in os.environ.items() if k != "BLOBSTATE_KEY_FILE"}
    env.update(BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD="1")
    if s3 is not None:
        from bench.s3server import client_env

        repo = f"s3://codec/enc-{variant}-{run}"
        env.update(client_env(), BLOBSTATE_STORAGE_OPTIONS=json.dumps({"endpoint_url": s3.endpoint}))
    if variant == "encrypted":
        env["BLOBSTATE_KEY_FILE"] = key_file
    return base, repo, dest, env


def _encryption_cost(size: int, keys: int, work: str, runs: int, cold: bool, s3: Any) -> dict[str, Any]:
    src = os.path.join(work, "enc-src")
    shutil.rmtree(src, ignore_errors=True)
    state.generate(src, size_bytes=size, keys=keys)
    key_file = os.path.join(work, "bench.key")
    with open(key_file, "wb") as fh:
        fh.write(os.urandom(32))
    os.chmod(key_file, 0o600)
    cli = [sys.executable, "-m", "blobstate.cli"]
    samples: dict[str, dict[str, list[Any]]] = {v: {"backup": [], "restore": []} for v in ("plain", "encrypted")}
    stored: dict[str, int] = {}
    for run in range(runs):
        # both backups, then both restores; the order of the variants alternates run by run, and every operation
        # starts with nothing dirty (a syncfs first), so neither inherits the other's writeback or deletes
        order = ("plain", "encrypted") if run % 2 == 0 else ("encrypted", "plain")
        setups = {variant: _setup(work, variant, run, key_file, s3) for variant in order}
        for op in ("backup", "restore"):
            for variant in order:
                base, repo, dest, env = setups[variant]
                argv = (["backup", src, "--repo", repo, "--store", "s", "-q"] if op == "backup" else
                        ["restore", dest, "--repo", repo, "--store", "s", "-q"])
                env["BLOBSTATE_WORK_DIR"] = os.path.join(base, f"work-{op}")  # the restore on another host
                measure.syncfs(work)
                if cold:
                    measure.drop_caches()
                else:  # both variants read what they read from the page cache (file:// backups copy in the kernel)
                    measure.warm([src] if op == "backup" else [] if s3 is not None else [repo])
                sample, _ = measure.run_measured([*cli, *argv], env=env, sync_path=src if op == "backup" else dest)
                samples[variant][op].append(sample)
        for variant, (base, repo, _, _) in setups.items():
            stored[variant] = (sum(s3.fs().du(repo[len("s3://"):], total=False).values()) if s3 is not None
                               else stored_bytes(repo))
            shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)
    out: dict[str, Any] = {"size_bytes": size, "cache": "cold" if cold else "warm", "stored_bytes": stored,
                           "backend": "s3 (moto)" if s3 is not None else "file"}
    for variant, ops in samples.items():
        out[variant] = {op: {"wall_s": statistics.median(s.wall_s for s in ss),
                             "cpu_s": statistics.median(s.cpu_s or 0.0 for s in ss),
                             "peak_rss_mib": max(s.peak_rss_mib for s in ss),
                             "walls_s": [round(s.wall_s, 3) for s in ss]} for op, ss in ops.items()}
    for op in ("backup", "restore"):
        out[f"{op}_ratio"] = out["encrypted"][op]["wall_s"] / out["plain"][op]["wall_s"]
        out[f"{op}_cpu_ratio"] = out["encrypted"][op]["cpu_s"] / max(1e-9, out["plain"][op]["cpu_s"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.codec", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="1GiB", help="state size of the encryption benchmark (default 1GiB)")
    p.add_argument("--compress-size", default="128MiB", help="state size of the RocksDB compression cases")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument("--cold", action="store_true", help="drop the page cache before every encryption operation")
    p.add_argument("--skip-flights", action="store_true", help="leave out the flights cases (needs the demo extra)")
    p.add_argument("--skip-encryption", action="store_true")
    p.add_argument("--skip-compression", action="store_true")
    p.add_argument("--backend", choices=["file", "s3"], default="file",
                   help="repository of the encryption benchmark: file:// or the counting moto S3 server")
    p.add_argument("--throughput-size", default="64MiB", help="bytes of the one-core throughput samples")
    args = p.parse_args(argv)
    size, csize = parse_size(args.size), parse_size(args.compress_size)
    work = args.work or tempfile.mkdtemp(prefix="blobstate-codec-")
    os.makedirs(work, exist_ok=True)
    report: dict[str, Any] = {"runs": args.runs, "compress_size_bytes": csize, "load": os.getloadavg(),
                              "throughput_mb_s": one_core_throughput(parse_size(args.throughput_size)),
                              "compression": {}}
    try:
        cases: list[tuple[str, Callable[[str], None], str]] = [
            ("rocksdb, incompressible values",
             lambda d: state.generate(d, size_bytes=csize, keys=max(1, csize // 1024)), "rocksdb"),
            ("rocksdb, JSON values, LZ4 block compression", lambda d: compressible_db(d, csize, "lz4"), "rocksdb"),
            ("rocksdb, JSON values, no block compression", lambda d: compressible_db(d, csize, "none"), "rocksdb"),
        ]
        if not args.skip_flights and not args.skip_compression:
            from blobstate.spark.demo.flights import load_flights, write_day_files

            frame = load_flights()
            cases += [("flights state (the demo's RocksDB)", lambda d: flights_db(d, frame), "rocksdb"),
                      ("flights input (365 day files, dir store)", lambda d: write_day_files(frame, d), "dir")]
            report["flights_changelogs"] = flights_changelogs(frame)
        for number, (name, make, store_type) in enumerate([] if args.skip_compression else cases):
            report["compression"][name] = compare_backup_restore(f"case{number}", make, store_type, work, args.runs)
        if not args.skip_encryption:
            report["encryption"] = encryption_cost(size, max(1, size // 1024), work, args.runs, args.cold,
                                                   args.backend)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    emit(report, markdown(report), args.out)
    return 0


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 1 << 20 else f"{n / 1024:,.1f} KiB"


def markdown(report: dict[str, Any]) -> str:
    """The report as the tables of bench/README.md."""
    t = report["throughput_mb_s"]
    lines = [f"medians of {report['runs']}; load average at the start {report['load'][0]:.2f} (2 cores)", "",
             "| one core | MB/s |", "| --- | ---: |"] + [f"| {k} | {v:,.0f} |" for k, v in t.items()]
    if report["compression"]:
        lines += ["", "| state (file://) | size | stored off / auto | ratio | backup off / auto: wall, CPU (s) "
                      "| restore off / auto: wall, CPU (s) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in report["compression"].items():
        off, auto = r["off"], r["auto"]
        lines.append(f"| {name} | {_mib(r['state_bytes'])} | {_mib(off['stored_bytes'])} / "
                     f"{_mib(auto['stored_bytes'])} | {off['stored_bytes'] / auto['stored_bytes']:.2f}x | "
                     f"{off['backup_s']:.2f} / {auto['backup_s']:.2f}, {off.get('backup_cpu_s', 0):.2f} / "
                     f"{auto.get('backup_cpu_s', 0):.2f} | {off['restore_s']:.2f} / {auto['restore_s']:.2f}, "
                     f"{off.get('restore_cpu_s', 0):.2f} / {auto.get('restore_cpu_s', 0):.2f} |")
    if "flights_changelogs" in report:
        c = report["flights_changelogs"]
        lines += ["", f"flights changelogs: {c['batches']} batches, {c['plain_bytes']:,} bytes plain, "
                      f"{c['zstd_bytes']:,} stored ({c['plain_bytes'] / c['zstd_bytes']:.2f}x; median batch "
                      f"{c['median_plain_bytes']:,.0f} bytes), zstd {c['compress_mb_s']:,.0f} MB/s in, "
                      f"{c['decompress_mb_s']:,.0f} MB/s out"]
    if "encryption" in report:
        e = report["encryption"]
        lines += ["", f"encryption, {_mib(e['size_bytes'])} RocksDB of incompressible values, "
                      f"{e.get('backend', 'file')}, page cache {e['cache']}; stored {_mib(e['stored_bytes']['plain'])}"
                      f" / {_mib(e['stored_bytes']['encrypted'])}", "",
                  "| | wall plain / encrypted (s) | ratio | CPU plain / encrypted (s) | ratio | peak RSS plain / "
                  "encrypted (MiB) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for op in ("backup", "restore"):
            p, c = e["plain"][op], e["encrypted"][op]
            lines.append(f"| {op} | {p['wall_s']:.2f} / {c['wall_s']:.2f} | {e[f'{op}_ratio']:.2f}x | "
                         f"{p['cpu_s']:.2f} / {c['cpu_s']:.2f} | {e.get(f'{op}_cpu_ratio', 0):.2f}x | "
                         f"{p['peak_rss_mib']:.0f} / {c['peak_rss_mib']:.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
