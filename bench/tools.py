"""What is measured: blobstate and the tools a user would pick instead, each as command lines on the same data.

Every tool answers ``backup(ctx, src, step)`` and ``restore(ctx, dest, mode)`` with a ``Cmd`` (argv, extra
environment, working directory), so the harness times them all the same way. ``mode`` is ``"empty"`` (restore into
an empty directory) or ``"prev"`` (into a directory holding the previous version). Configuration is each tool's
default, except where noted in ``NOTES`` (said in the output too).
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any

from bench import kafka_changelog, state
from bench.s3server import S3Server, client_env

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORE = "state"

NOTES = {
    "blobstate": "CLI `blobstate backup --store-type rocksdb` (its own RocksDB checkpoint of the source, read-only "
                 "open) and `blobstate restore` with a fresh work dir (a new host: no local checkpoint to reuse).",
    "restic": "`restic backup .` from the same source path each time, with `--ignore-ctime` (the harness "
              "re-links the source, which changes ctime); restore `latest` with an empty cache (a new host).",
    "rclone": "`rclone sync` with defaults (size + modtime comparison, 4 transfers).",
    "backupengine": "Debian's `ldb backup` / `ldb restore` (RocksDB 7.8 BackupEngine, 1 thread by default); it opens "
                    "the DB read-write, so it backs up what RocksDB 7.8 writes on open; file:// only.",
    "blobstate-nofsync": "blobstate with `BLOBSTATE_FILE_FSYNC=0` (file:// backups only): the same commit without the "
                         "fsync of every blob, lease, index and new directory, to show what durability costs.",
    "blobstate-identity": "blobstate's restore into the previous version with `--verify-kept identity` (an SST "
                          "whose size and mtime are the snapshot's is kept unread; the default, `cache`, reads "
                          "every kept SST this host never hashed), from the blobstate tool's repository.",
    "limit": "file://: `cp -a` of exactly the files that must move (all of them, or the new SSTs and mutable files, "
             "or on restore into the previous version only the files that differ); s3://: a raw parallel obstore "
             "client (`bench/s3raw.py`: whole-file PUTs 8 at a time; 8 MiB ranged GETs 16 at a time written with "
             "pwrite) of the same files / the same blobs blobstate wrote. The cloud target compares blobstate with "
             "the fastest client measured (this one or rclone).",
    "changelog": "a compacted Kafka-style log (v0 message framing, CRC32 checked per record) of the final state, "
                 "replayed into an empty RocksDB in WriteBatches of 500 records (one poll); read from local disk, "
                 "so no network: the most favourable case for replay.",
    "changelog-kafka": "the same state produced (once per run, untimed) into a compacted one-partition topic of a "
                       "real Apache Kafka 0.9.0.1 broker on 127.0.0.1 (ZooKeeper 3.4.6; both JVMs started by the "
                       "harness); replayed by a kafka-python consumer (`api_version=(0, 9)`, CRCs checked, no "
                       "group) from the beginning to the end offset into an empty RocksDB, one WriteBatch per poll "
                       "(<= 500 records), then flushed: Samza's restore before blob stores. Loopback, not a remote "
                       "broker; the broker's own CPU, disk reads and memory are not in the I/O and RSS columns, "
                       "nor are the bytes the consumer received (Python's recv() is not counted in read()).",
}


@dataclass(frozen=True)
class Cmd:
    """A command line; ``env`` is laid over this process's environment (a ``None`` value removes the variable)."""

    argv: list[str]
    env: dict[str, str | None] = field(default_factory=dict)
    cwd: str | None = None

    def environ(self) -> dict[str, str]:
        merged: dict[str, str | None] = {**os.environ, **self.env}
        return {k: v for k, v in merged.items() if v is not None}


@dataclass
class Ctx:
    """One tool on one backend in one run: its scratch directory, the S3 server (or None), the snapshots."""

    backend: str
    work: str
    run: int
    snaps: dict[str, str]  # "v0", "v1", "v2" -> snapshot directory
    s3: S3Server | None = None
    shared: dict[str, Any] = field(default_factory=dict)  # facts one tool leaves for another (blob lists)
    changelog: str | None = None

    @property
    def bucket(self) -> str:
        return f"bench-{os.path.basename(self.work)}-{self.run}".lower()

    def s3_env(self) -> dict[str, str | None]:
        """Credentials for the moto server; the machine's ``AWS_CA_BUNDLE`` removed (plain HTTP, and rclone
        refuses a custom CA bundle with its own transport)."""
        return {**client_env(), "AWS_CA_BUNDLE": None} if self.s3 else {}


def _py(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def py_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": REPO_ROOT + (os.pathsep + path if path else "")}


class Tool:
    name = ""
    backends: tuple[str, ...] = ("file", "s3")
    binaries: tuple[str, ...] = ()
    ops: tuple[str, ...] = ("backup_full", "backup_incr_1pct", "backup_incr_10pct", "restore_empty", "restore_prev")

    def missing(self) -> str | None:
        """Why this tool cannot run here (a binary not on PATH), or None."""
        for b in self.binaries:
            if shutil.which(b) is None:
                return f"{b} not installed (run .ci/install-bench.sh)"
        return None

    def setup(self, ctx: Ctx) -> None:
        os.makedirs(ctx.work, exist_ok=True)
        if ctx.backend == "file":
            os.makedirs(os.path.join(ctx.work, "repo"), exist_ok=True)

    def backup(self, ctx: Ctx, src: str, step: str) -> Cmd:
        raise NotImplementedError

    def restore(self, ctx: Ctx, dest: str, mode: str) -> Cmd:
        raise NotImplementedError

    def backup_extra(self, stdout: str) -> dict[str, Any]:
        """Figures a tool reports about its own backup (blobstate: the commit's own time, without start-up)."""
        return {}

    def restore_inputs(self, ctx: Ctx) -> list[str]:
        """Paths a restore reads (read once before it when the cache is warm): the repository, the changelog."""
        return [os.path.join(ctx.work, "repo"), ctx.changelog or ""]

    def restore_extra(self, ctx: Ctx) -> dict[str, Any]:
        """Facts about a restore's untimed preparation, recorded with its sample (the Kafka topic load)."""
        return {}

    def after_backups(self, ctx: Ctx) -> None:
        """Hook after the three backups (blobstate records its blob lists for the S3 limit)."""

    def repo_listing(self, ctx: Ctx) -> dict[str, tuple[int, str]]:
        """Objects of this tool's repository: path -> (size in bytes, version tag: mtime or ETag)."""
        if ctx.backend == "file":
            root = os.path.join(ctx.work, "repo")
            out: dict[str, tuple[int, str]] = {}
            for dirpath, _dirs, files in os.walk(root):
                for n in files:
                    p = os.path.join(dirpath, n)
                    st = os.stat(p)
                    out[os.path.relpath(p, root)] = (st.st_size, str(st.st_mtime_ns))
            return out
        assert ctx.s3 is not None
        fs = ctx.s3.fs()
        if not fs.exists(ctx.bucket):
            return {}
        found = fs.find(ctx.bucket, detail=True)
        return {k: (int(v.get("size", 0)), str(v.get("ETag", ""))) for k, v in found.items()}

    def teardown(self, ctx: Ctx) -> None:
        if ctx.s3 is not None:
            fs = ctx.s3.fs()
            if fs.exists(ctx.bucket):
                fs.rm(ctx.bucket, recursive=True)
        shutil.rmtree(ctx.work, ignore_errors=True)


class Blobstate(Tool):
    name = "blobstate"
    binaries = ("blobstate",)

    def _repo(self, ctx: Ctx) -> list[str]:
        if ctx.backend == "file":
            return ["--repo", "file://" + os.path.join(ctx.work, "repo")]
        assert ctx.s3 is not None
        return ["--repo", f"s3://{ctx.bucket}/repo", "--storage-option", f"endpoint_url={ctx.s3.endpoint}"]

    def setup(self, ctx: Ctx) -> None:
        super().setup(ctx)
        if ctx.s3 is not None:
            ctx.s3.fs().mkdir(ctx.bucket)

    def backup(self, ctx: Ctx, src: str, step: str) -> Cmd:
        argv = ["blobstate", "backup", src, *self._repo(ctx), "--store", STORE, "--store-type", "rocksdb", "-q",
                "--json", "--work-dir", os.path.join(ctx.work, "wd-backup")]
        return Cmd(argv, ctx.s3_env())

    def backup_extra(self, stdout: str) -> dict[str, Any]:
        """``commit_s``: the commit's own duration (checkpoint to completion) from ``--json``'s ``durationMs``:
        what a long-running job (Spark) pays per commit, without the CLI's interpreter start-up."""
        try:
            return {"commit_s": json.loads(stdout)["durationMs"] / 1000.0}
        except (ValueError, KeyError, TypeError):
            return {}

    def restore(self, ctx: Ctx, dest: str, mode: str) -> Cmd:
        wd = os.path.join(ctx.work, f"wd-restore-{mode}")
        shutil.rmtree(wd, ignore_errors=True)
        argv = ["blobstate", "restore", dest, *self._repo(ctx), "--store", STORE, "-q", "--work-dir", wd]
        if mode == "prev":  # the previous version was put there by cp -a, not by a restore: say it may be replaced
            argv.append("--force")
        return Cmd(argv, ctx.s3_env())

    def after_backups(self, ctx: Ctx) -> None:
        ctx.shared["blobstate_repo"] = self._repo(ctx)[1]  # what blobstate-identity restores from
        if ctx.s3 is None:
            return
        ctx.shared["blobstate_blobs"] = blob_lists(ctx.s3.fs(), f"{ctx.bucket}/repo")


class BlobstateIdentity(Blobstate):
    """blobstate's restore into the previous version with ``--verify-kept identity`` (an SST kept by its size and
    mtime, unread), from the repository the blobstate tool just wrote: the opt-in mode beside the default."""

    name = "blobstate-identity"
    ops = ("restore_prev",)

    def setup(self, ctx: Ctx) -> None:
        if "blobstate_repo" not in ctx.shared:
            raise RuntimeError("the blobstate tool's repository is needed (run it in the same --tools)")
        Tool.setup(self, ctx)

    def after_backups(self, ctx: Ctx) -> None:
        """No backups of its own: the blobstate tool's repository stays the one shared."""

    def restore(self, ctx: Ctx, dest: str, mode: str) -> Cmd:
        cmd = super().restore(ctx, dest, mode)
        argv = [ctx.shared["blobstate_repo"] if a == self._repo(ctx)[1] else a for a in cmd.argv]
        return Cmd([*argv, "--verify-kept", "identity"], cmd.env, cmd.cwd)


class BlobstateNoFsync(Blobstate):
    """blobstate on file:// with the repository fsyncs off: the cost of durability (issue 12, item 7)."""

    name = "blobstate-nofsync"
    backends = ("file",)
    ops = ("backup_full", "backup_incr_1pct", "backup_incr_10pct")

    def backup(self, ctx: Ctx, src: str, step: str) -> Cmd:
        cmd = super().backup(ctx, src, step)
        return Cmd(cmd.argv, {**cmd.env, "BLOBSTATE_FILE_FSYNC": "0"}, cmd.cwd)


def blob_lists(fs: Any, repo: str) -> dict[str, list[str]]:
    """The blobs of blobstate's latest snapshot (``"empty"``: all; ``"prev"``: those of files that differ from the
    snapshot before it), as bucket keys, read from the checkpoint records and indexes in the repository."""
    from blobstate.codec import frame

    def plain(name: str) -> bytes:  # an index is stored zstd-compressed (blobstate.codec; unencrypted here)
        sink = io.BytesIO()
        frame.decode(name, fs.cat_file(f"{repo}/{name}"), sink, cipher=None)
        return sink.getvalue()

    records = sorted(fs.find(f"{repo}/checkpoints/default/0/{STORE}"))
    docs = [json.loads(fs.cat_file(r)) for r in records[-2:]]
    indexes = [json.loads(plain(d["indexBlobId"])) for d in docs]

    def files(index: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {f["fileName"]: f for f in index["dirIndex"]["filesPresent"]}

    new = files(indexes[-1])
    old = files(indexes[0]) if len(indexes) > 1 else {}

    def same(f: dict[str, Any]) -> bool:
        o = old.get(f["fileName"])
        return o is not None and o["sizeInBytes"] == f["sizeInBytes"] and o["crc32c"] == f["crc32c"]

    def keys(fs_: list[dict[str, Any]]) -> list[str]:
        return [posixpath.join(repo, b["blobId"]) for f in fs_ for b in f["blobs"]]

    return {"empty": keys(list(new.values())), "prev": keys([f for f in new.values() if not same(f)])}


class Restic(Tool):
    name = "restic"
    binaries = ("restic",)

    def _env(self, ctx: Ctx, cache: str) -> dict[str, str | None]:
        return {**ctx.s3_env(), "RESTIC_PASSWORD": "bench-not-a-secret",
                "RESTIC_CACHE_DIR": os.path.join(ctx.work, cache)}

    def _repo(self, ctx: Ctx) -> str:
        if ctx.backend == "file":
            return os.path.join(ctx.work, "repo")
        assert ctx.s3 is not None
        return f"s3:{ctx.s3.endpoint}/{ctx.bucket}"

    def setup(self, ctx: Ctx) -> None:
        import subprocess

        super().setup(ctx)
        repo = self._repo(ctx)
        if ctx.backend == "file":
            os.rmdir(repo)  # restic init wants to create it
        subprocess.run(["restic", "-r", repo, "init", "-q"], env=Cmd([], self._env(ctx, "cache")).environ(),
                       check=True, capture_output=True)

    def backup(self, ctx: Ctx, src: str, step: str) -> Cmd:
        return Cmd(["restic", "-r", self._repo(ctx), "backup", ".", "--ignore-ctime", "-q"],
                   self._env(ctx, "cache"), cwd=src)

    def restore(self, ctx: Ctx, dest: str, mode: str) -> Cmd:
        cache = f"cache-restore-{mode}"
        shutil.rmtree(os.path.join(ctx.work, cache), ignore_errors=True)
        return Cmd(["restic", "-r", self._repo(ctx), "restore", "latest", "--target", dest, "-q"],
                   self._env(ctx, cache))


class Rclone(Tool):
    name = "rclone"
    binaries = ("rclone",)

    def _env(self, ctx: Ctx) -> dict[str, str | None]:
        env: dict[str, str | None] = {**ctx.s3_env(), "RCLONE_CONFIG": os.path.join(ctx.work, "rclone.conf")}
        if ctx.s3 is not None:
            env.update({"RCLONE_CONFIG_S3_TYPE": "s3", "RCLONE_CONFIG_S3_PROVIDER": "Other",
                        "RCLONE_CONFIG_S3_ENDPOINT": ctx.s3.endpoint, "RCLONE_CONFIG_S3_ENV_AUTH": "true",
                        "RCLONE_CONFIG_S3_REGION": client_env()["AWS_DEFAULT_REGION"]})
        return env

    def _remote(self, ctx: Ctx) -> str:
        return os.path.join(ctx.work, "repo") if ctx.backend == "file" else f"s3:{ctx.bucket}/repo"

    def backup(self, ctx: Ctx, src: str, step: str) -> Cmd:
        return Cmd(["rclone", "sync", src, self._remote(ctx)], self._env(ctx))

    def restore(self, ctx: Ctx, dest: str, mode: str) -> Cmd:
        return Cmd(["rclone", "sync", self._remote(ctx), dest], self._env(ctx))


class BackupEngine(Tool):
    name = "backupengine"
    backends = ("file",)
    binaries = ("ldb",)

    def backup(self, ctx: Ctx, src: str, step: str) -> Cmd:
        return Cmd(["ldb", f"--db={src}", "--ignore_unknown_options", "backup",
                    f"--backup_dir={os.path.join(ctx.work, 'repo')}"])

    def restore(self, ctx: Ctx, dest: str, mode: str) -> Cmd:
        return Cmd(["ldb", f"--db={dest}", "--ignore_unknown_options", "restore",
                    f"--backup_dir={os.path.join(ctx.work, 'repo')}"])


STEPS = {"backup_full": ("v0", None), "backup_incr_1pct": ("v1", "v0"), "backup_incr_10pct": ("v2", "v1")}


class Limit(Tool):
    """The physical limit: move exactly the bytes that must move, with the plainest tool."""

    name = "limit"

    def _names(self, ctx: Ctx, step: str) -> list[str]:
        version, prev = STEPS[step]
        if prev is None:
            return sorted(state.inventory(ctx.snaps[version]))
        return state.delta_files(ctx.snaps[prev], ctx.snaps[version])

    def setup(self, ctx: Ctx) -> None:
        super().setup(ctx)
        if ctx.s3 is not None:
            ctx.s3.fs().mkdir(ctx.bucket)

    def backup(self, ctx: Ctx, src: str, step: str) -> Cmd:
        names = self._names(ctx, step)
        if ctx.backend == "file":
            return Cmd(["cp", "-a", *[os.path.join(src, n) for n in names], os.path.join(ctx.work, "repo")])
        assert ctx.s3 is not None
        return Cmd(_py("bench.s3raw", "put", ctx.s3.endpoint, src, f"{ctx.bucket}/repo", *names),
                   {**ctx.s3_env(), **py_env()})

    def restore(self, ctx: Ctx, dest: str, mode: str) -> Cmd:
        names = (sorted(state.inventory(ctx.snaps["v2"])) if mode == "empty"
                 else state.delta_files(ctx.snaps["v1"], ctx.snaps["v2"]))
        if ctx.backend == "file":
            os.makedirs(dest, exist_ok=True)
            return Cmd(["cp", "-a", *[os.path.join(ctx.work, "repo", n) for n in names], dest])
        assert ctx.s3 is not None
        keys = ctx.shared.get("blobstate_blobs", {}).get(mode) or [f"{ctx.bucket}/repo/{n}" for n in names]
        return Cmd(_py("bench.s3raw", "get", ctx.s3.endpoint, dest, *keys), {**ctx.s3_env(), **py_env()})


class Changelog(Tool):
    name = "changelog"
    backends = ("file",)
    ops = ("restore_empty",)

    def restore(self, ctx: Ctx, dest: str, mode: str) -> Cmd:
        assert ctx.changelog is not None
        return Cmd(_py("bench.replay", ctx.changelog, dest), py_env())


class ChangelogKafka(Tool):
    """Changelog replay from a real Kafka 0.9.0.1 broker: ``setup`` starts ZooKeeper + the broker under the tool's
    scratch dir and produces v2 into a compacted topic (untimed); the restore is ``python -m bench.replay_kafka``;
    ``teardown`` stops both JVMs by their PIDs (the harness calls it even when setup or a restore failed)."""

    name = "changelog-kafka"
    backends = ("file",)
    ops = ("restore_empty",)
    BROKER = "kafka_broker"  # key of the running ``Broker`` in ``ctx.shared``

    def missing(self) -> str | None:
        return kafka_changelog.missing()

    def setup(self, ctx: Ctx) -> None:
        import time

        super().setup(ctx)
        broker = kafka_changelog.Broker(os.path.join(ctx.work, "broker"))
        ctx.shared[self.BROKER] = broker
        t0 = time.perf_counter()
        broker.start()
        started = time.perf_counter()
        broker.create_topic(kafka_changelog.TOPIC)
        created = time.perf_counter()
        records = kafka_changelog.load_state(broker.bootstrap, kafka_changelog.TOPIC, ctx.snaps["v2"])
        loaded = time.perf_counter()
        ctx.shared["kafka_load"] = {
            "broker_start_s": round(started - t0, 2), "topic_create_s": round(created - started, 2),
            "topic_load_s": round(loaded - created, 2), "topic_records": records,
            "topic_log_bytes": sum(os.path.getsize(os.path.join(d, n))
                                   for d, _dirs, files in os.walk(broker.log_dir) for n in files
                                   if n.endswith(".log")),
        }

    def restore(self, ctx: Ctx, dest: str, mode: str) -> Cmd:
        broker = ctx.shared[self.BROKER]
        return Cmd(_py("bench.replay_kafka", broker.bootstrap, kafka_changelog.TOPIC, dest), py_env())

    def restore_inputs(self, ctx: Ctx) -> list[str]:
        broker = ctx.shared.get(self.BROKER)
        return [broker.log_dir] if broker is not None else []

    def restore_extra(self, ctx: Ctx) -> dict[str, Any]:
        return dict(ctx.shared.get("kafka_load", {}))

    def teardown(self, ctx: Ctx) -> None:
        broker = ctx.shared.pop(self.BROKER, None)
        try:
            if broker is not None:
                broker.stop()
        finally:
            super().teardown(ctx)


ALL_TOOLS: tuple[Tool, ...] = (Blobstate(), BlobstateIdentity(), BlobstateNoFsync(), Limit(), Restic(), Rclone(),
                               BackupEngine(), Changelog(), ChangelogKafka())
