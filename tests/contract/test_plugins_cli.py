"""Third-party plugins as real distributions (a dist-info with entry points, found on PYTHONPATH): a broken plugin
is reported by `blobstate plugins` and breaks nothing else; backend selection when two plugins claim one scheme
(priority, the BLOBSTATE_BACKEND_<SCHEME> override, a clear ambiguity error naming both distributions)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dists import make_dist, plugin_env

from blobstate import BlobStoreSpec, hookimpl
from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError, PluginError
from blobstate.plugin.manager import build_plugin_manager, get_plugin_manager, reset_plugin_manager
from blobstate.plugins.fsspec_store import FsspecBlobStore
from blobstate.repository.backends import open_blob_store

# A blob store plugin for the made-up scheme dup://: a real fsspec store under $DUP_ROOT/<backend name>/.
DUP_PLUGIN = '''
import os
from blobstate import BlobStoreSpec, hookimpl
from blobstate.plugins.fsspec_store import FsspecBlobStore

NAME, PRIORITY = {name!r}, {priority}


def make_store(url, *, storage_options, ttl_mode, max_concurrency):
    root = os.path.join(os.environ["DUP_ROOT"], NAME, url.split("://", 1)[1])
    os.makedirs(root, exist_ok=True)
    return FsspecBlobStore("file://" + root, storage_options=storage_options, ttl_mode=ttl_mode,
                           max_concurrency=max_concurrency)


@hookimpl
def blobstate_blob_stores():
    return [BlobStoreSpec(name=NAME, schemes=("dup",), factory=make_store, priority=PRIORITY)]
'''


def make_store_dir(path: Path) -> dict[str, bytes]:
    files = {"a.txt": b"alpha" * 100, "sub/b.bin": bytes(range(256)) * 10}
    for rel, data in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(data)
    return files


def read_tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


# -- a broken plugin -----------------------------------------------------------------------------------------
@pytest.fixture
def broken_plugins(tmp_path) -> Path:
    root = tmp_path / "site"
    make_dist(root, "broken-at-import", "0.3", "brokenplug", 'raise RuntimeError("boom at import")\n')
    make_dist(root, "broken-hook", "1.2.3", "hookfail", '''
        from blobstate import hookimpl

        @hookimpl
        def blobstate_blob_stores():
            raise ValueError("hook exploded")
    ''')
    return root


def test_plugins_lists_a_broken_plugin_with_its_error(cli, broken_plugins):
    env = plugin_env(broken_plugins)
    text = cli("plugins", env=env)
    assert text.returncode == 0, text.stderr
    assert "brokenplug  [broken-at-import 0.3]  BROKEN" in text.stdout
    assert "error: import failed: RuntimeError: boom at import" in text.stdout
    assert "hookfail  [broken-hook 1.2.3]  BROKEN" in text.stdout
    assert "hook exploded" in text.stdout
    assert "rocksdb  [blobstate" in text.stdout  # the healthy ones are all still there

    payload = cli("plugins", "--json", env=env)
    assert payload.returncode == 0, payload.stderr
    plugins = {p["name"]: p for p in payload.json()["plugins"]}
    broken = plugins["brokenplug"]
    assert (broken["distribution"], broken["version"], broken["builtin"], broken["status"]) == (
        "broken-at-import", "0.3", False, "broken")
    assert broken["error"] == "import failed: RuntimeError: boom at import"
    assert plugins["hookfail"]["status"] == "broken"
    assert "ValueError" in plugins["hookfail"]["error"]
    assert plugins["fsspec"]["status"] == "ok" and plugins["fsspec"]["backends"]


def test_a_broken_plugin_breaks_no_other_command(cli, broken_plugins, tmp_path):
    env = plugin_env(broken_plugins)
    store = tmp_path / "state"
    files = make_store_dir(store)
    repo = str(tmp_path / "repo")
    assert cli("--help", env=env).returncode == 0
    backup = cli("backup", str(store), "--repo", repo, "--store-type", "dir", env=env)
    assert backup.returncode == 0, backup.stderr
    listed = cli("list", "--repo", repo, "--store", "state", "--json", env=env)
    assert listed.returncode == 0 and backup.stdout.strip() in listed.stdout
    restored = cli("restore", str(tmp_path / "out"), "--repo", repo, "--store", "state", "--store-type", "dir",
                   env=env)
    assert restored.returncode == 0, restored.stderr
    assert read_tree(tmp_path / "out") == files
    assert cli("verify", "--repo", repo, "--store", "state", env=env).returncode == 0


# -- selection between two plugins for one scheme: in process -------------------------------------------------
class DupPlugin:
    """A plugin object offering a real fsspec blob store for dup:// rooted at ``root/<name>``."""

    def __init__(self, name: str, priority: int, root: Path, schemes: tuple[str, ...] = ("dup",)) -> None:
        self.spec = BlobStoreSpec(name=name, schemes=schemes, factory=self.make, priority=priority)
        self.root = root / name

    def make(self, url: str, *, storage_options: dict, ttl_mode: str | None, max_concurrency: int):
        path = self.root / url.split("://", 1)[1].lstrip("/")
        path.mkdir(parents=True, exist_ok=True)
        return FsspecBlobStore(f"file://{path}", storage_options=storage_options, ttl_mode=ttl_mode,
                               max_concurrency=max_concurrency)

    @hookimpl
    def blobstate_blob_stores(self):
        return [self.spec]


def manager_with(*plugins: tuple[DupPlugin, str]):
    """A fresh process-wide manager: the built-ins plus ``(plugin, distribution)`` pairs, no entry points."""
    mgr = build_plugin_manager(autoload=False)
    for plugin, dist in plugins:
        mgr.register(plugin, f"{plugin.spec.name}_plugin", distribution=dist, version="1.0")
    reset_plugin_manager(mgr)
    return mgr


def test_equal_priority_is_an_error_naming_both_distributions(tmp_path):
    manager_with((DupPlugin("alpha", 0, tmp_path), "alpha-dist"), (DupPlugin("beta", 0, tmp_path), "beta-dist"))
    with pytest.raises(PluginError) as err:
        open_blob_store("dup://bucket/repo")
    message = str(err.value)
    assert "alpha-dist" in message and "beta-dist" in message
    assert "'alpha'" in message and "'beta'" in message
    assert "BLOBSTATE_BACKEND_DUP" in message
    assert not (tmp_path / "alpha").exists() and not (tmp_path / "beta").exists()


@pytest.mark.parametrize("order", ["high-first", "high-last"])
def test_the_higher_priority_wins(tmp_path, order):
    high, low = (DupPlugin("high", 10, tmp_path), "high-dist"), (DupPlugin("low", 0, tmp_path), "low-dist")
    manager_with(*([high, low] if order == "high-first" else [low, high]))
    store = open_blob_store("dup://bucket/repo", retry=False)
    store.put_exclusive("x/probe", b"hello")
    assert (tmp_path / "high" / "bucket" / "repo" / "x" / "probe").read_bytes() == b"hello"
    assert not (tmp_path / "low").exists()


def test_configuration_overrides_priority(tmp_path, monkeypatch):
    manager_with((DupPlugin("alpha", 0, tmp_path), "alpha-dist"), (DupPlugin("beta", 0, tmp_path), "beta-dist"),
                 (DupPlugin("gamma", 50, tmp_path), "gamma-dist"))
    monkeypatch.setenv("BLOBSTATE_BACKEND_DUP", "beta")
    settings = Settings.from_environ()  # as a verb builds them, then hands them down
    store = open_blob_store("dup://b/r", retry=False, settings=settings)
    store.put_exclusive("probe", b"1")
    assert (tmp_path / "beta" / "b" / "r" / "probe").is_file()
    assert get_plugin_manager().select(BlobStoreSpec, "dup", settings).distribution == "beta-dist"
    monkeypatch.setenv("BLOBSTATE_BACKEND_DUP", "nosuch")
    with pytest.raises(ConfigurationError, match="nosuch"):
        open_blob_store("dup://b/r", settings=Settings.from_environ())


def test_a_third_party_can_take_over_a_builtin_scheme(tmp_path, monkeypatch):
    manager_with((DupPlugin("mine", 10, tmp_path, schemes=("file",)), "my-dist"))
    assert get_plugin_manager().select(BlobStoreSpec, "file").spec.name == "mine"
    monkeypatch.setenv("BLOBSTATE_BACKEND_FILE", "fsspec")  # and the user can take it back
    reg = get_plugin_manager().select(BlobStoreSpec, "file", Settings.from_environ())
    assert (reg.spec.name, reg.distribution) == ("fsspec", "blobstate")


def test_two_distributions_giving_one_backend_name_is_an_error(tmp_path):
    mgr = manager_with((DupPlugin("same", 0, tmp_path), "first-dist"))
    clash = DupPlugin("same", 5, tmp_path)
    mgr.register(clash, "clash_plugin", distribution="second-dist", version="2.0")
    with pytest.raises(PluginError, match="first-dist.*second-dist|second-dist.*first-dist"):
        open_blob_store("dup://b/r")


# -- selection, end to end through the CLI with real distributions -------------------------------------------
@pytest.fixture
def dup_site(tmp_path) -> Path:
    root = tmp_path / "site"
    make_dist(root, "alpha-dist", "1.0", "alpha_plugin", DUP_PLUGIN.format(name="alpha", priority=0))
    make_dist(root, "beta-dist", "2.0", "beta_plugin", DUP_PLUGIN.format(name="beta", priority=0))
    return root


def test_cli_ambiguity_and_override(cli, dup_site, tmp_path):
    store = tmp_path / "state"
    files = make_store_dir(store)
    dup_root = tmp_path / "dup"
    env = plugin_env(dup_site, DUP_ROOT=str(dup_root))

    failed = cli("backup", str(store), "--repo", "dup://bucket/repo", "--store-type", "dir", env=env)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "PluginError" in failed.stderr
    assert "alpha-dist" in failed.stderr and "beta-dist" in failed.stderr
    assert "BLOBSTATE_BACKEND_DUP" in failed.stderr

    listing = cli("plugins", env=env)
    assert listing.returncode == 0, listing.stderr  # the diagnostic command itself keeps working
    problems = [line for line in listing.stdout.splitlines() if line.startswith("problem:")]
    assert len(problems) == 1 and "alpha-dist" in problems[0] and "beta-dist" in problems[0]

    env["BLOBSTATE_BACKEND_DUP"] = "beta"
    log = ("--log", (tmp_path / "log").as_uri())  # see test_cli_override_keeps_the_default_checkpoint_log
    backup = cli("backup", str(store), "--repo", "dup://bucket/repo", *log, "--store-type", "dir", env=env)
    assert backup.returncode == 0, backup.stderr
    assert any((dup_root / "beta" / "bucket" / "repo").rglob("blobs/*")) and not (dup_root / "alpha").exists()
    restored = cli("restore", str(tmp_path / "out"), "--repo", "dup://bucket/repo", *log, "--store", "state",
                   "--store-type", "dir", env=env)
    assert restored.returncode == 0, restored.stderr
    assert read_tree(tmp_path / "out") == files
    payload = cli("plugins", "--json", env=env).json()
    chosen = {b["name"]: b["selectedFor"] for p in payload["plugins"] for b in p["backends"]}
    assert (chosen["alpha"], chosen["beta"], payload["problems"]) == ([], ["dup"], [])


def test_cli_override_keeps_the_default_checkpoint_log(cli, dup_site, tmp_path):
    store = tmp_path / "state"
    make_store_dir(store)
    env = plugin_env(dup_site, DUP_ROOT=str(tmp_path / "dup"), BLOBSTATE_BACKEND_DUP="beta")
    backup = cli("backup", str(store), "--repo", "dup://bucket/repo", "--store-type", "dir", env=env)
    assert backup.returncode == 0, backup.stderr
    assert any((tmp_path / "dup" / "beta" / "bucket" / "repo" / "checkpoints").rglob("*.json"))


def test_cli_higher_priority_distribution_wins(cli, dup_site, tmp_path):
    make_dist(dup_site, "gamma-dist", "0.1", "gamma_plugin", DUP_PLUGIN.format(name="gamma", priority=10))
    store = tmp_path / "state"
    make_store_dir(store)
    dup_root = tmp_path / "dup"
    env = plugin_env(dup_site, DUP_ROOT=str(dup_root))
    backup = cli("backup", str(store), "--repo", "dup://b/r", "--store-type", "dir", env=env)
    assert backup.returncode == 0, backup.stderr
    assert sorted(p.name for p in dup_root.iterdir()) == ["gamma"]
    payload = cli("plugins", "--json", env=env).json()
    gamma = next(p for p in payload["plugins"] if p["name"] == "gamma_plugin")
    assert (gamma["distribution"], gamma["version"], gamma["backends"][0]["selectedFor"]) == (
        "gamma-dist", "0.1", ["dup"])
    assert payload["problems"] == []
