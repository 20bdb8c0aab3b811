"""Repository-wide verbs over many stores: ``list``, ``stats``, ``verify`` and ``gc --dry-run`` of one repository
holding N stores, on the counting moto S3 server (``bench/s3server.py``), with the requests each verb made.

``python -m bench.many_stores --stores 10000 --out bench/results/many-stores.json``

The repository is written straight into moto's backend (``S3Server.put_direct``, uncounted: seconds for 10,000
stores instead of one PUT each): its marker (``blobstate init``), and per store ``--checkpoints`` snapshots, each a
record (``checkpoints/<store key>/<generation>.json``), a snapshot index and ``--files`` files of one small blob
each, exactly what ``blobstate backup`` writes (the model's own schemas build every object). Then each verb runs
as the CLI (``blobstate <verb> --repo s3://... --json -v``, a fresh process, ``--max-concurrency``), timed, its
requests counted by the server, its CPU seconds (user and system: the client's own work) and its store calls read
from its ``-v`` line; every answer is checked (a row per checkpoint, a report per store, nothing to delete).
``list`` and ``gc --dry-run`` run twice: cold (this host's cache of immutable objects emptied first,
``blobstate.local.object_cache``) and warm (the same command again, the cache as the cold run left it): the rows
``list`` and ``list (warm)``.

Beside the verbs, the server's own limit is measured the same way: one listing of the whole bucket and GETs of
one small object per store at each concurrency of ``--get-concurrency`` (raw obstore requests, no blobstate): a
verb that must read one record and one index per store cannot be faster than 2N such GETs; whether more requests
in flight help a one-process server (moto, under the GIL) is read off the sweep.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench.s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server, client_env

BUCKET = "manystores"
REPO = "repo"
#: gc runs two days ahead (its hidden ``--now``): every object is older than the TTL, so each one is checked against
#: what the retained snapshots reference, as in a repository that has lived a while (nothing is deleted: all are).
AHEAD_MS = 2 * 86_400_000
VERBS = (("list", ["list"]), ("stats", ["stats"]), ("verify", ["verify"]), ("gc --dry-run", ["gc", "--dry-run"]))
TARGETS_S = {"list": 10.0, "gc --dry-run": 30.0}  # issue 31, at 10,000 stores


def store_objects(job: str, task: str, store: str, *, checkpoints: int, files: int, now_ms: int,
                  seed: int) -> dict[str, bytes]:
    """Every object of one store with ``checkpoints`` snapshots of ``files`` one-blob files (keys inside the
    repository), built with blobstate's own schemas."""
    from blobstate.local.checksum import crc32c_bytes
    from blobstate.model.index import DirIndex, FileBlob, FileIndex, SnapshotIndex
    from blobstate.model.layout import blob_id, index_id, record_id
    from blobstate.model.records import Checkpoint, StoreKey

    key = StoreKey(job, task, store)
    out: dict[str, bytes] = {}
    prev: str | None = None
    for generation in range(1, checkpoints + 1):
        entries = []
        for f in range(files):
            data = f"{key}/{generation}/{f}/{seed}".encode() * 4
            bid = blob_id(key, f"{seed:08x}{generation:08x}{f:08x}{abs(hash(key)) % (1 << 32):08x}")
            out[bid] = data
            entries.append(FileIndex(file_name=f"{f:06d}.sst", blobs=(FileBlob(blob_id=bid, offset=0),),
                                     size_in_bytes=len(data), crc32c=crc32c_bytes(data), mtime=now_ms,
                                     ctime=now_ms))
        checkpoint_id = f"{now_ms - 1000 * (checkpoints - generation)}-{generation:08x}"
        index = SnapshotIndex(checkpoint_id=checkpoint_id, created_time_ms=now_ms, job_name=job,
                              job_instance="bench:1:000000", task_name=task, store_name=store,
                              dir_index=DirIndex(dir_name="", files_present=tuple(entries)),
                              prev_snapshot_index_blob_id=prev, store_type="dir", retain=checkpoints)
        iid = index_id(key, f"{seed:08x}{generation:08x}{'0' * 8}{abs(hash(key)) % (1 << 32):08x}")
        data = index.to_bytes()
        out[iid] = data
        record = Checkpoint(key, checkpoint_id, generation, iid, crc32c_bytes(data), len(data), now_ms,
                            writer_id="bench:1:000000")
        out[record_id(key, generation)] = record.to_bytes()
        prev = iid
    return out


def populate(server: S3Server, stores: int, *, checkpoints: int, files: int, env: dict[str, str]) -> float:
    """A repository of ``stores`` stores in the bucket; returns the seconds it took."""
    t0 = time.perf_counter()
    server.put_direct(BUCKET, {})  # the bucket
    _cli(["init", *_repo_args(server)], env)
    now_ms = int(time.time() * 1000)
    batch: dict[str, bytes] = {}
    for i in range(stores):
        job, task = f"job{i // 1000:03d}", f"{(i // 100) % 10}"
        batch.update({f"{REPO}/{k}": v for k, v in store_objects(job, task, f"s{i:05d}", checkpoints=checkpoints,
                                                                  files=files, now_ms=now_ms, seed=7).items()})
        if len(batch) >= 20_000:
            server.put_direct(BUCKET, batch)
            batch = {}
    if batch:
        server.put_direct(BUCKET, batch)
    return time.perf_counter() - t0


def _repo_args(server: S3Server) -> list[str]:
    return ["--repo", f"s3://{BUCKET}/{REPO}", "--storage-option", f"endpoint_url={server.endpoint}"]


def _cli(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "blobstate.cli", *argv], capture_output=True, text=True, env=env,
                          timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"blobstate {' '.join(argv[:2])} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


_CALLS = re.compile(r": (\d+) store calls \(([^)]*)\)")


def run_verb(server: S3Server, argv: list[str], *, concurrency: int, env: dict[str, str]) -> dict[str, Any]:
    """One verb as the CLI: wall seconds, the server's request counts, the verb's own store-call line, its JSON."""
    server.counts(reset=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = _cli([*argv, *_repo_args(server), "--max-concurrency", str(concurrency), "--json", "-v"], env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    counts = server.counts()
    found = _CALLS.search(proc.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wallS": round(wall, 3), "clientCpuS": round(cpu, 2), "requests": counts,
            "storeCalls": int(found.group(1)) if found else None,
            "storeCallsByKind": found.group(2) if found else None, "answer": json.loads(proc.stdout)}


def check(verb: str, answer: list[dict[str, Any]], stores: int, checkpoints: int) -> None:
    """Every verb saw every store: a row per checkpoint, a report per store, nothing for gc to delete."""
    if verb == "list":
        assert len(answer) == stores * checkpoints, (verb, len(answer))
        assert all(row["error"] is None and row["filesTotal"] is not None for row in answer), verb
    elif verb == "stats":
        assert len(answer) == stores and all(not s["problems"] for s in answer), verb
    elif verb == "verify":
        assert len(answer) == stores and all(r["ok"] for r in answer), verb
    else:
        assert len(answer) == stores, (verb, len(answer))
        assert not any(r["expiredDeleted"] or r["orphansDeleted"] or r["skipped"] for r in answer), verb


def raw_limit(server: S3Server, stores: int, concurrencies: list[int]) -> dict[str, Any]:
    """The server's own pace: one listing of the whole bucket, and one GET per store of a small object (its
    record) at each of ``concurrencies`` in flight, by a raw obstore client."""
    import obstore
    from obstore.store import S3Store

    store = S3Store(BUCKET, endpoint=server.endpoint, access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY,
                    region=REGION, client_options={"allow_http": True})
    server.counts(reset=True)
    t0 = time.perf_counter()
    keys = [o["path"] for batch in obstore.list(store, f"{REPO}/") for o in batch]
    list_s = time.perf_counter() - t0
    list_requests = server.counts()["total"]
    records = [k for k in keys if k.startswith(f"{REPO}/checkpoints/")][:stores]

    async def get_all(concurrency: int) -> None:
        sem = asyncio.Semaphore(concurrency)

        async def one(key: str) -> None:
            async with sem:
                await (await obstore.get_async(store, key)).bytes_async()

        await asyncio.gather(*(one(k) for k in records))

    sweep = []
    for concurrency in concurrencies:
        t0 = time.perf_counter()
        asyncio.run(get_all(concurrency))
        get_s = time.perf_counter() - t0
        sweep.append({"concurrency": concurrency, "getS": round(get_s, 3),
                      "getsPerS": round(len(records) / get_s, 1) if get_s else None})
    return {"objects": len(keys), "listS": round(list_s, 3), "listRequests": list_requests, "gets": len(records),
            "listPerPageS": round(list_s / max(1, list_requests), 3), "getSweep": sweep}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=int, default=10_000)
    parser.add_argument("--checkpoints", type=int, default=1, help="snapshots per store")
    parser.add_argument("--files", type=int, default=2, help="files (one blob each) per snapshot")
    parser.add_argument("--concurrency", type=int, default=16, help="--max-concurrency of every verb")
    parser.add_argument("--verbs", default=",".join(v for v, _ in VERBS))
    parser.add_argument("--get-concurrency", default="1,16,64",
                        help="in-flight GETs of the raw server limit, comma-separated (a sweep)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    wanted = args.verbs.split(",")
    with tempfile.TemporaryDirectory(prefix="blobstate-many-stores-") as work:
        server = S3Server(os.path.join(work, "moto.log"))
        env = {**os.environ, **client_env(), "BLOBSTATE_WORK_DIR": os.path.join(work, "host"),
               "BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD": "1"}
        try:
            populate_s = populate(server, args.stores, checkpoints=args.checkpoints, files=args.files, env=env)
            print(f"populated {args.stores} stores in {populate_s:.1f} s", file=sys.stderr)
            results: dict[str, Any] = {}
            for verb, verb_argv in VERBS:
                if verb not in wanted:
                    continue
                if verb_argv[0] == "gc":
                    verb_argv = [*verb_argv, "--now", str(int(time.time() * 1000) + AHEAD_MS)]
                shutil.rmtree(os.path.join(env["BLOBSTATE_WORK_DIR"], "cache"), ignore_errors=True)  # cold
                for name in (verb, f"{verb} (warm)") if verb in TARGETS_S else (verb,):
                    result = run_verb(server, verb_argv, concurrency=args.concurrency, env=env)
                    check(verb, result.pop("answer"), args.stores, args.checkpoints)
                    results[name] = result
                    print(f"{name}: {result['wallS']:.2f} s, {result['requests']['total']} requests "
                          f"({', '.join(f'{k} {v}' for k, v in result['requests'].items() if k != 'total')})",
                          file=sys.stderr)
            limit = raw_limit(server, args.stores, [int(c) for c in args.get_concurrency.split(",")])
        finally:
            server.stop()
    doc = {"stores": args.stores, "checkpointsPerStore": args.checkpoints, "filesPerSnapshot": args.files,
           "concurrency": args.concurrency, "populateS": round(populate_s, 1), "verbs": results, "serverLimit": limit,
           "targetsS": {k: v for k, v in TARGETS_S.items() if k in results}, "load": os.getloadavg(),
           "moto": _moto_version()}
    print(render(doc))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=2)
    return doc


def render(doc: dict[str, Any]) -> str:
    """The results as a Markdown table."""
    lim = doc["serverLimit"]
    lines = [f"{doc['stores']} stores x {doc['checkpointsPerStore']} snapshot(s) of {doc['filesPerSnapshot']} files, "
             f"--max-concurrency {doc['concurrency']}, load {', '.join(f'{x:.1f}' for x in doc['load'])}", "",
             "| verb | wall s | client CPU s | target s | requests (server) | by kind | store calls (client) |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    for verb, r in doc["verbs"].items():
        kinds = ", ".join(f"{k} {v}" for k, v in r["requests"].items() if k != "total")
        target = doc["targetsS"].get(verb.removesuffix(" (warm)"), "-")
        lines.append(f"| {verb} | {r['wallS']:.2f} | {r.get('clientCpuS', '-')} | {target} | "
                     f"{r['requests']['total']} | {kinds} | {r['storeCalls']} |")
    lines.append(f"| server limit: one listing of {lim['objects']} objects | {lim['listS']:.2f} | - | - | "
                 f"{lim['listRequests']} | LIST | - |")
    lines += [f"| server limit: {lim['gets']} GETs, {g['concurrency']} in flight (raw obstore) | {g['getS']:.2f} | - | "
              f"- | {lim['gets']} | {g['getsPerS']}/s | - |" for g in lim["getSweep"]]
    return "\n".join(lines)


def _moto_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("moto")
    except Exception:  # noqa: BLE001 - only a label
        return None


if __name__ == "__main__":
    main()
