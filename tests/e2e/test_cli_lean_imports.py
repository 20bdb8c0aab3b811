"""Issue 31: a command imports only what it needs. ``blobstate backup -q`` of a store runs without importing
restore, the read-only catalog, gc, verify or rich (a progress bar is drawn only on a terminal), and reads the
installed entry points from the cache once nothing installed changed (no ``importlib.metadata`` scan). Into a
``file://`` repository it imports neither fsspec (its import alone is 40-100 ms: asyncio, ssl, and its own scan of
every distribution's entry points) nor ``importlib.metadata`` (the built-ins' install hints are read only when one
is shown), nor the cipher of encrypted repositories, nor tenacity (until a storage call fails transiently),
OpenTelemetry (until a meter provider can be set), platformdirs (with the work and cache dirs configured) or the
sealed log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from fixtures_core import write_keys

PROBE = textwrap.dedent("""
    import json, sys
    from importlib import metadata
    calls, reads = [], []
    real, real_dists = metadata.entry_points, metadata.distributions
    metadata.entry_points = lambda **kw: calls.append(kw) or real(**kw)
    metadata.distributions = lambda **kw: reads.append(kw) or real_dists(**kw)
    from blobstate.cli import main
    try:
        main(sys.argv[1:], standalone_mode=False)
    finally:
        mods = sorted(sys.modules)
        print(json.dumps({"modules": mods, "scans": [c for c in calls if c.get("group") == "blobstate"],
                          "distributions": reads}))
""")


def _probe(tmp_path, *argv):
    env = {**os.environ, "BLOBSTATE_WORK_DIR": str(tmp_path / "work"), "BLOBSTATE_CACHE_DIR": str(tmp_path / "cache"),
           "BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD": "0"}
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_backup_imports_no_restore_catalog_gc_verify_or_rich_and_reads_entry_points_from_the_cache(tmp_path):
    store = tmp_path / "s"
    write_keys(store, n=200)
    repo = f"file://{tmp_path / 'repo'}"
    first = _probe(tmp_path, "backup", str(store), "--repo", repo, "-q")
    assert first["scans"] == [{"group": "blobstate"}]  # nothing cached yet: one scan, then the cache is written
    second = _probe(tmp_path, "backup", str(store), "--repo", repo, "-q")
    assert second["scans"] == []  # from the cache
    modules = set(second["modules"])
    assert "blobstate.commit.backup" in modules  # the probe saw the backup run
    unneeded = {m for m in modules if m.startswith(("rich", "blobstate.restoring", "blobstate.maintenance.catalog",
                                                    "blobstate.maintenance.gc", "blobstate.maintenance.verify",
                                                    "blobstate.maintenance.stores", "blobstate.spark"))}
    assert not unneeded, sorted(unneeded)

    # a file:// repository: no fsspec (the fsspec store opens it through blobstate.plugins.toolkit.local_files), no
    # cipher (not encrypted), and no read of installed distributions (the probe itself imports importlib.metadata: its
    # calls are counted instead; the built-ins' install hints read pip's record only when one is shown)
    costly = {m for m in modules if m.split(".")[0] in ("fsspec", "asyncio", "ssl", "cryptography", "s3fs", "obstore",
                                                          "aiohttp")}
    assert not costly, sorted(costly)
    assert second["distributions"] == []

    # nor what only another case needs: tenacity (the first transient fault), OpenTelemetry (a configured meter
    # provider, when blobstate-otel is installed), platformdirs (no work or cache dir configured: the probe sets
    # both), the sealed log (an encrypted repository); not tempfile, which the probe's importlib.metadata imports
    lazy = {m for m in modules if m.split(".")[0] in ("tenacity", "opentelemetry", "platformdirs")
            or m == "blobstate.codec.log"}
    assert not lazy, sorted(lazy)
