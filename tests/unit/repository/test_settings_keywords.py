"""The API's keywords feed the one settings object (issue 28): while a verb runs, ``settings.current()`` has its
keywords (winning over the environment), in its own thread only; the plugin manager built inside the call hands
them to plugins with the configuration hook, credentials redacted."""

from __future__ import annotations

import threading

import pytest

from blobstate import api
from blobstate.commit.backup import StoreCommitter
from blobstate.local import workdir
from blobstate.plugin import manager
from blobstate.repository import settings


@pytest.fixture
def fresh_manager():
    manager.reset_plugin_manager()
    yield
    manager.reset_plugin_manager()


@pytest.fixture
def store(tmp_path):
    src = tmp_path / "counts"
    src.mkdir()
    (src / "a").write_bytes(b"a" * 100)
    return src


def test_a_verbs_keywords_are_in_the_settings_while_it_runs(tmp_path, store, monkeypatch):
    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "from-env"))
    seen = []
    backup = StoreCommitter.backup

    def spying(self, *args, **kwargs):
        seen.append((settings.current(), workdir.default_base()))
        return backup(self, *args, **kwargs)

    monkeypatch.setattr(StoreCommitter, "backup", spying)
    api.backup(str(store), repo=str(tmp_path / "repo"), retain=2, ttl="2d", work_base=str(tmp_path / "from-api"),
               progress=None, on_create=lambda url: None)
    [(during, base)] = seen
    assert (during.options["retain"], during.options["ttl"], during.work_dir) == (2, "2d", str(tmp_path / "from-api"))
    assert base == str(tmp_path / "from-api")
    assert "on_create" not in during.options  # a callback is no setting
    after = settings.current()
    assert "retain" not in after.options and after.work_dir == str(tmp_path / "from-env")


def test_another_threads_call_keeps_its_own_keywords():
    ready, release = threading.Barrier(2), threading.Event()
    seen: dict[str, object] = {}

    def call(name: str, retain: int) -> None:
        with settings.api_call({"retain": retain}):
            ready.wait(5)
            release.wait(5)
            seen[name] = settings.current().options["retain"]

    threads = [threading.Thread(target=call, args=(n, r)) for n, r in (("a", 1), ("b", 7))]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(10)
    assert seen == {"a": 1, "b": 7}


def test_plugins_get_the_keywords_of_the_call_that_builds_the_manager(tmp_path, store, fresh_manager, monkeypatch):
    delivered = []
    configure = manager.BlobstatePluginManager.configure

    def recording(self, config):
        delivered.append((config, self.settings))
        return configure(self, config)

    monkeypatch.setattr(manager.BlobstatePluginManager, "configure", recording)
    api.backup(str(store), repo=str(tmp_path / "repo"), retain=2, work_base=str(tmp_path / "w"),
               storage_options={"secret": "hunter2", "anon": True})
    [(config, handed)] = delivered
    assert (config["retain"], config["work_base"], handed.options["retain"]) == (2, str(tmp_path / "w"), 2)
    assert config["storage_options"]["anon"] is True and "hunter2" not in repr(config)


def test_a_calls_keywords_reach_its_blob_store_threads_and_no_other_call():
    """A blob store's concurrent requests (``map_concurrent`` -> ``run_settled``) run in copies of the calling
    context: the call's limits and append-only mode are what ``current()`` says in them; a concurrent call in
    another thread keeps its own."""
    from blobstate.plugin.inflight import run_settled

    seen: dict[str, set] = {"a": set(), "b": set()}
    ready = threading.Barrier(2)

    def record(name: str) -> None:
        now = settings.current()
        seen[name].add((threading.current_thread().name, now.limit_upload, now.append_only))

    def call(name: str, limit: str) -> None:
        with settings.api_call({"limit_upload": limit, "append_only": name == "a"}):
            ready.wait(5)
            run_settled(lambda _: record(name), range(8), 4)

    threads = [threading.Thread(target=call, args=(n, lim)) for n, lim in (("a", "1MiB"), ("b", "3MiB"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert {(rate, ao) for _, rate, ao in seen["a"]} == {(1 << 20, True)}
    assert {(rate, ao) for _, rate, ao in seen["b"]} == {(3 << 20, False)}
    assert all(thread.startswith("ThreadPoolExecutor") for thread, _, _ in seen["a"] | seen["b"])
    assert settings.current().limit_upload is None  # nothing stays behind after the calls
